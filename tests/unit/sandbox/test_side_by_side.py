"""``side_by_side``: what an agent's deploy and the docker sandbox start containers with. Every
call runs to its end before the caller hears a failure or a cancellation, so nothing a call
creates appears after the caller has unwound (and its teardown has listed the sandbox)."""

from __future__ import annotations

import asyncio

import pytest

from agent_env.api import side_by_side


async def _slow(finished: list[str], name: str, delay: float, fail: bool = False) -> str:
    await asyncio.sleep(delay)
    finished.append(name)
    if fail:
        raise RuntimeError(f"{name} failed")
    return name


async def test_results_come_in_the_order_of_the_calls() -> None:
    finished: list[str] = []
    assert await side_by_side(_slow(finished, "a", 0.02), _slow(finished, "b", 0)) == ["a", "b"]
    assert finished == ["b", "a"]  # they ran at once
    assert await side_by_side() == []


async def test_a_failure_is_raised_only_after_the_other_calls_end() -> None:
    finished: list[str] = []
    with pytest.raises(RuntimeError, match="fast failed"):
        await side_by_side(_slow(finished, "fast", 0, fail=True), _slow(finished, "slow", 0.05))
    assert finished == ["fast", "slow"]


async def test_a_cancelled_caller_waits_for_its_calls() -> None:
    finished: list[str] = []
    caller = asyncio.ensure_future(side_by_side(_slow(finished, "a", 0.05),
                                                _slow(finished, "b", 0.05, fail=True)))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert sorted(finished) == ["a", "b"]

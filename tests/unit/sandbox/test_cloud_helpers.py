"""The shared promises of cloud providers: timed commands, leak-free creates, retried deletes.

The "service" here is a small in-memory record of what a create made; no SDK is involved.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_env.api import (
    create_without_leaks,
    delete_with_retries,
    missing_sdk,
    timed_argv,
    timed_result,
)


class RateLimited(Exception):
    pass


class Refused(Exception):
    pass


class Service:
    """Stands in for a cloud API: records what each create made and what was reclaimed."""

    def __init__(self, failures: list[Exception], *, makes_before_failing: bool = True,
                 answer_after: float = 0.0) -> None:
        self.failures = failures
        self.makes_before_failing = makes_before_failing
        self.answer_after = answer_after
        self.made: list[str] = []
        self.reclaimed: list[str | None] = []

    async def create(self) -> str:
        name = f"box-{len(self.made)}"
        if self.makes_before_failing or not self.failures:
            self.made.append(name)
        await asyncio.sleep(self.answer_after)
        if self.failures:
            raise self.failures.pop(0)
        return name

    async def reclaim(self, made: str | None) -> None:
        self.reclaimed.append(made)


def no_wait(attempt: int, error: BaseException) -> float:
    return 0.0


def test_timed_commands_are_killed_and_said_to_time_out() -> None:
    assert timed_argv("echo hi", None) == ["bash", "-c", "echo hi"]
    assert timed_argv(["ls", "-l"], 2.5) == ["timeout", "-k", "5", "2.5", "ls", "-l"]
    assert timed_result(124, "", "", 2.5).stderr == "timed out after 2.5s"
    assert timed_result(124, "", "", None).stderr == ""  # its own 124, no timeout given
    assert timed_result(0, "out", "", 2.5).stdout == "out"


async def test_a_rate_limited_create_is_retried_and_then_made() -> None:
    service = Service([RateLimited(), RateLimited()], makes_before_failing=False)
    made = await create_without_leaks(service.create, service.reclaim, retry_on=(RateLimited,),
                                      delay=no_wait)
    assert made == "box-0" and service.reclaimed == []


async def test_retries_run_out_with_the_last_error() -> None:
    service = Service([RateLimited()] * 3, makes_before_failing=False)
    with pytest.raises(RateLimited):
        await create_without_leaks(service.create, service.reclaim, retry_on=(RateLimited,),
                                   attempts=3, delay=no_wait)
    assert service.reclaimed == []


async def test_a_failed_create_reclaims_what_it_may_have_made() -> None:
    service = Service([RuntimeError("lost the answer")])
    with pytest.raises(RuntimeError):
        await create_without_leaks(service.create, service.reclaim)
    assert service.made == ["box-0"] and service.reclaimed == [None]  # found by its name


async def test_a_refusal_that_made_nothing_reclaims_nothing() -> None:
    service = Service([Refused()], makes_before_failing=False)
    with pytest.raises(Refused):
        await create_without_leaks(service.create, service.reclaim,
                                   made_nothing=lambda e: isinstance(e, Refused))
    assert service.reclaimed == []


async def test_a_cancelled_create_reclaims_what_it_made_once_it_answers() -> None:
    service = Service([], answer_after=0.3)
    task = asyncio.ensure_future(create_without_leaks(service.create, service.reclaim))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert service.reclaimed == ["box-0"]


async def test_a_delete_is_retried_and_gone_counts_as_done() -> None:
    calls: list[int] = []

    async def flaky() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("busy")

    assert await delete_with_retries(flaky, retry_on=(RuntimeError,)) is None
    assert len(calls) == 3

    async def gone() -> None:
        raise KeyError("no such sandbox")

    assert await delete_with_retries(gone, retry_on=(KeyError,), gone=(KeyError,)) is None

    async def broken() -> None:
        raise RuntimeError("down")

    error = await delete_with_retries(broken, retry_on=(RuntimeError,), attempts=2)
    assert isinstance(error, RuntimeError)


def test_a_missing_sdk_names_the_extra_to_install() -> None:
    assert missing_sdk("json", "core") is None
    assert missing_sdk("agentenv_no_such_sdk", "nosdk", "No-Such") == (
        "the No-Such SDK is not installed (pip install 'agentenv-framework[nosdk]')")

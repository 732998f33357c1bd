"""A watch on what a run deployed (``TaskContext.watch``): a report ends the run at once as an
infra error on the running step; a quiet or broken watch changes nothing; a report about a
sandbox the run already took down is not a failure; the run's end stops every watch."""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

import attrs

from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.steps import Step


class Box:
    """Test double: stands in for a sandbox; only its identity matters here."""

    id = "box"
    provider_name = "test-double"

    async def terminate(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {"provider": self.provider_name, "id": self.id}


@attrs.define(kw_only=True)
class Deploys(Step):
    """Registers a sandbox and a watch that reports ``why`` after ``after`` seconds (None:
    stops quietly; "raise": the watch itself fails)."""

    type = "deploys"
    seen: ClassVar[list[str]] = []
    why: str | None = None
    after: float = 0.05
    drop_sandbox: bool = False

    async def run(self, ctx: TaskContext) -> None:
        box: Any = Box()
        ctx.sandboxes["box"] = box

        async def probe() -> str | None:
            try:
                await asyncio.sleep(self.after)
            except asyncio.CancelledError:
                Deploys.seen.append("cancelled")
                raise
            if self.why == "raise":
                raise RuntimeError("the watch broke")
            return self.why

        ctx.watch("env shop", probe(), box)
        if self.drop_sandbox:
            ctx.sandboxes.pop("box")


@attrs.define(kw_only=True)
class Works(Step):
    type = "works"
    seconds: float = 5.0

    async def run(self, ctx: TaskContext) -> None:
        await asyncio.sleep(self.seconds)


def run(deploy: dict[str, Any], work: float = 5.0) -> tuple[Any, float]:
    task = TaskSpec("t", "tasks/t.json", [
        {"type": "deploys", "id": "deploy", **deploy},
        {"type": "works", "id": "agent", "depends_on": ["deploy"], "seconds": work},
    ])
    context = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    started = time.monotonic()
    result = asyncio.run(run_task(task, context, registry={"deploys": Deploys, "works": Works},
                                  emit=lambda *a, **k: None))
    return result, time.monotonic() - started


def test_a_report_ends_the_run_at_once_as_infra_on_the_running_step() -> None:
    result, seconds = run({"why": "env server env-notes stopped mid-run (exited with code 137)"})
    assert seconds < 1.0  # not the 5 s the agent step would have taken
    assert result.outcome == "error"
    (failure,) = result.failures
    assert (failure.step_id, failure.is_infra, failure.summary) == (
        "agent", True, "env shop: env server env-notes stopped mid-run (exited with code 137) "
        "(the run stopped)")


def test_quiet_broken_or_orphaned_watches_change_nothing() -> None:
    for deploy in ({"why": None}, {"why": "raise"}, {"why": "gone", "drop_sandbox": True}):
        result, _ = run(deploy, work=0.2)
        assert (result.outcome, result.failures) == ("unscored", []), deploy


def test_the_runs_end_stops_every_watch() -> None:
    Deploys.seen.clear()
    result, seconds = run({"why": "late", "after": 30}, work=0.05)
    assert result.failures == [] and seconds < 5
    assert Deploys.seen == ["cancelled"]

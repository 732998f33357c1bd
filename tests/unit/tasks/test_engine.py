"""The DAG rules, failures, retry, seeds and cancellation of the task engine."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import attrs
import pytest

from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import run_task
from agent_env.tasks.plan import TaskSpec, effective_dependencies
from agent_env.tasks.records import MemoryInstances
from agent_env.tasks.scores import ScoreRow
from agent_env.tasks.steps import Step, StepError

LOG: list[str] = []


@attrs.define(kw_only=True)
class Note(Step):
    """Logs start/end after ``sleep`` seconds; fails its first ``fail_times`` runs."""

    type = "note"
    failures: ClassVar[dict[str, int]] = {}

    text: str | None = None
    sleep: float = 0.0
    fail_times: int = 0
    score: float | None = None

    async def run(self, ctx: TaskContext) -> None:
        LOG.append(f"start {self.text or self.id}")
        await asyncio.sleep(self.sleep)
        done = Note.failures.get(self.id, 0)
        if done < self.fail_times:
            Note.failures[self.id] = done + 1
            raise StepError(f"{self.id} failed")
        if self.score is not None:
            ctx.record_verification(self, self.id, [ScoreRow(0, self.score, self.score >= 1)],
                                    "all_pass")
        LOG.append(f"end {self.text or self.id}")


@attrs.define(kw_only=True)
class Warmed(Step):
    """Its ``prepare`` logs while earlier steps run; ``prepare_fails`` makes it raise, and
    ``prepare_sleep`` keeps it going past the task's end."""

    type = "warmed"
    prepare_fails: bool = False
    prepare_sleep: float = 0.0
    cancelled: ClassVar[list[str]] = []

    async def prepare(self, ctx: TaskContext) -> None:
        LOG.append(f"prepare {self.id}")
        if self.prepare_fails:
            raise RuntimeError("warm-up broke")
        try:
            await asyncio.sleep(self.prepare_sleep)
        except asyncio.CancelledError:
            Warmed.cancelled.append(self.id)
            raise
        LOG.append(f"prepared {self.id}")

    async def run(self, ctx: TaskContext) -> None:
        LOG.append(f"run {self.id}")


REGISTRY = {"note": Note, "warmed": Warmed}


@pytest.fixture(autouse=True)
def clean():
    LOG.clear()
    Note.failures.clear()


def ctx(**kwargs) -> TaskContext:
    return TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts(),
                       **kwargs)


def spec(*steps: dict) -> TaskSpec:
    return TaskSpec("t", "tasks/t.json", [{"type": "note", **s} for s in steps])


async def run(task: TaskSpec, context: TaskContext | None = None, instances=None):
    return await run_task(task, context or ctx(), registry=REGISTRY, instances=instances,
                          emit=lambda *a, **k: None)


def steps_of(*raw: dict) -> list[Note]:
    return [Note(**r) for r in raw]


async def test_prepare_runs_while_earlier_steps_work_and_never_fails_the_run():
    Warmed.cancelled.clear()
    task = TaskSpec("t", "tasks/t.json", [
        {"type": "note", "id": "deploy", "sleep": 0.05},
        {"type": "warmed", "id": "verify"},
        {"type": "warmed", "id": "broken", "prepare_fails": True},
        {"type": "warmed", "id": "slow", "prepare_sleep": 30},
    ])
    result = await run(task)
    assert result.outcome == "unscored" and result.failures == []
    # every prepare started before the first step ended; the quick one finished meanwhile
    assert LOG.index("prepared verify") < LOG.index("end deploy")
    assert {"prepare verify", "prepare broken", "prepare slow"} <= set(
        LOG[:LOG.index("end deploy")])
    assert LOG[-3:] == ["run verify", "run broken", "run slow"]
    assert Warmed.cancelled == ["slow"]  # still warming when the task ended: cancelled


def test_no_depends_on_is_a_strict_chain():
    deps = effective_dependencies(steps_of({"id": "a"}, {"id": "b"}, {"id": "c"}))
    assert deps == {"a": (), "b": ("a",), "c": ("b",)}


def test_undeclared_step_waits_for_all_earlier_when_others_declare():
    deps = effective_dependencies(
        steps_of({"id": "a"}, {"id": "b", "depends_on": []}, {"id": "c"})
    )
    assert deps == {"a": (), "b": (), "c": ("a", "b")}


async def test_ready_steps_run_concurrently():
    result = await run(spec(
        {"id": "a", "sleep": 0.05, "depends_on": []},
        {"id": "b", "sleep": 0.05, "depends_on": []},
        {"id": "c", "depends_on": ["a", "b"]},
    ))
    assert result.outcome == "unscored"
    assert LOG[:2] == ["start a", "start b"]
    assert LOG[-2:] == ["start c", "end c"]
    assert result.completed_steps == ["a", "b", "c"]


async def test_fatal_failure_stops_dispatch_and_waits_for_in_flight():
    instances = MemoryInstances()
    result = await run(spec(
        {"id": "slow", "sleep": 0.05, "depends_on": []},
        {"id": "bad", "fail_times": 1, "depends_on": []},
        {"id": "after", "depends_on": ["slow"]},
    ), instances=instances)
    assert result.outcome == "failed"
    assert "end slow" in LOG and "start after" not in LOG
    (failure,) = result.failures
    assert (failure.step_id, failure.error_type, failure.is_fatal) == ("bad", "StepError", True)
    assert failure.error == "bad failed" and failure.started_at_utc.endswith("Z")
    assert result.describe() == "failed at step 'bad': bad failed"
    record = instances.get("t-12345678")
    assert record.status == "failed" and record.completed_steps == ["slow"]
    assert record.failures[0].step_id == "bad"


async def test_tolerant_failure_unblocks_dependents_but_fails_the_outcome():
    result = await run(spec(
        {"id": "a", "fail_times": 1, "fail_task_on_error": False},
        {"id": "b", "score": 1},
    ))
    assert "end b" in LOG
    assert result.outcome == "failed"
    assert result.failures[0].is_fatal is False
    assert result.scores == {"b": 1.0}


async def test_retry_rolls_back_the_span_and_runs_it_again():
    result = await run(spec(
        {"id": "setup"},
        {"id": "prep"},
        {"id": "check", "fail_times": 1,
         "retry_config": {"retry_from_step_id": "prep", "max_retries": 1}},
    ))
    assert result.outcome == "unscored"
    assert LOG == ["start setup", "end setup", "start prep", "end prep", "start check",
                   "start prep", "end prep", "start check", "end check"]
    assert [f.step_id for f in result.retried_failures] == ["check"]
    assert result.failures == []


async def test_retry_gives_up_after_max_retries():
    result = await run(spec({"id": "x", "fail_times": 5, "retry_config": {"max_retries": 2}}))
    assert LOG.count("start x") == 3
    assert result.outcome == "failed"


async def test_seed_replaces_placeholders_in_every_string():
    context = ctx(seed={"name": "world", "n": 3})
    await run(spec({"id": "a", "text": "hello <name> <n> <other>"}), context)
    assert LOG[0] == "start hello world 3 <other>"


async def test_scores_and_outcomes():
    result = await run(spec({"id": "v", "score": 1}, {"id": "w", "score": 0}))
    assert result.outcome == "scored below 1"
    assert result.describe() == "scored below 1 (v: 1, w: 0)"


async def test_cancel_records_cancelled():
    instances = MemoryInstances()
    task = asyncio.ensure_future(run(spec({"id": "a", "sleep": 5}), instances=instances))
    await asyncio.sleep(0.05)
    task.cancel()
    result = await task
    assert result.outcome == "cancelled"
    assert instances.get("t-12345678").status == "cancelled"


def test_secrets_are_stripped_from_snapshots():
    context = ctx(metadata={"api_key": "sk-very-secret", "note": "token is hunter22"})
    context.register_secret("hunter22")
    snapshot = context.snapshot()
    assert "api_key" not in snapshot["metadata"]
    assert snapshot["metadata"]["note"] == "token is ****"

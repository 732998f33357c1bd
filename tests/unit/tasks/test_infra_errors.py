"""Infrastructure failures end a run as ``error``, counted apart from the agent's failures."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from agent_env.sandbox.base import SandboxError
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.records import InstanceRecord, MemoryInstances
from agent_env.tasks.scores import ScoreRow
from agent_env.tasks.steps import InfraError, Step, StepError
from agent_env.tasks.summary import count_line, run_json, summary_json


@attrs.define(kw_only=True)
class Raise(Step):
    """Raises the exception ``kind`` names, or scores ``score``."""

    type = "raise"
    kinds: ClassVar[dict[str, Any]] = {  # (not type[...]: ``type`` is the step's name here)
        "step": StepError, "infra": InfraError, "sandbox": SandboxError}

    kind: str | None = None
    score: float | None = None

    async def run(self, ctx: TaskContext) -> None:
        if self.kind:
            raise self.kinds[self.kind](f"{self.kind} broke")
        if self.score is not None:
            ctx.record_verification(self, self.id, [ScoreRow(0, self.score, self.score >= 1)],
                                    "all_pass")


async def run(*steps: dict[str, Any], instances: MemoryInstances | None = None) -> Any:
    ctx = TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts())
    spec = TaskSpec("t", "tasks/t.json", [{"type": "raise", **s} for s in steps])
    return await run_task(spec, ctx, registry={"raise": Raise}, instances=instances,
                          emit=lambda *a, **k: None)


async def test_an_infra_error_ends_the_run_as_error_not_failed() -> None:
    instances = MemoryInstances()
    result = await run({"id": "deploy", "kind": "infra"}, {"id": "v", "score": 1},
                       instances=instances)
    assert result.outcome == "error" and result.scores == {}
    assert result.describe() == ("error (infrastructure, not scored) at step 'deploy': "
                                 "infra broke")
    record = instances.get("t-12345678")
    assert record is not None and record.outcome == "error"
    assert record.failures[0].is_infra is True
    # the record reads back (cattrs) with the new field, and old records without it still do
    old = record.to_json()
    del old["failures"][0]["is_infra"]
    assert InstanceRecord.from_json(old).failures[0].is_infra is False


async def test_a_sandbox_error_counts_as_infrastructure_too() -> None:
    assert (await run({"id": "up", "kind": "sandbox"})).outcome == "error"


async def test_a_step_error_is_still_a_failure() -> None:
    result = await run({"id": "ask", "kind": "step"})
    assert result.outcome == "failed" and result.failures[0].is_infra is False


async def test_a_tolerated_infra_failure_does_not_turn_the_run_into_an_error() -> None:
    result = await run({"id": "flaky", "kind": "infra", "fail_task_on_error": False},
                       {"id": "v", "score": 1})
    assert result.outcome == "failed"  # a failure was recorded, but infrastructure did not end it


async def test_counts_and_json_keep_errors_apart_from_failures() -> None:
    results = [await run({"id": "v", "score": 1}), await run({"id": "a", "kind": "step"}),
               await run({"id": "d", "kind": "infra"}), await run({"id": "w", "score": 0})]
    assert count_line(results) == ("4 runs: 1 passed, 1 scored below 1, 1 failed, "
                                   "1 infrastructure error (not scored)")
    summary = summary_json(results)
    assert (summary["runs"], summary["passed"], summary["failed"], summary["errors"],
            summary["scored_below_1"]) == (4, 1, 1, 1, 1)
    rows = [run_json(r) for r in results]
    assert [r["error_kind"] for r in rows] == [None, "task", "infra", None]
    assert rows[2]["failed_step"] == "d" and rows[2]["error"] == "infra broke"


def test_secret_keys_are_dropped_but_token_counts_are_kept() -> None:
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    kept = ctx.strip_secrets({"token": "a", "access_token": "b", "gatewayToken": "c",
                              "x-api-key": "d", "input_tokens": 3, "output_tokens": 4,
                              "max_tokens": 5})
    assert kept == {"input_tokens": 3, "output_tokens": 4, "max_tokens": 5}

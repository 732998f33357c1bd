"""``validation_gate_aggregator``: passed, failed, skipped and missing gates, from the
verifications earlier steps recorded."""

from __future__ import annotations

import asyncio

from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.scores import ScoreRow, Verification
from agent_env.tasks.step_types.verify_steps import ValidationGateAggregator


def gate(verifications: dict[str, Verification], **keys: object) -> dict[str, object]:
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    ctx.verifications.update(verifications)
    step = ValidationGateAggregator(id="gate", **keys)  # type: ignore[arg-type]
    asyncio.run(step.run(ctx))
    return dict(ctx.outputs["gate"])


def test_every_kind_of_gate() -> None:
    ok = Verification("schema", "s", 1.0, (ScoreRow(0, 1.0, True),))
    bad = Verification("correct", "c", 0.5, (ScoreRow(0, 1.0, True), ScoreRow(1, 0.0, False)))
    idle = Verification("spec", "p", 0.0, (ScoreRow(0, 0.0, False, skipped=True),))
    summary = gate({"schema": ok, "correct": bad, "spec": idle},
                   required_gates=["schema", "correct", "spec", "assess"])
    assert summary == {"passed": False, "required_gates": ["schema", "correct", "spec",
                                                            "assess"],
                       "failed_gates": ["correct"], "missing_gates": ["assess"],
                       "skipped_gates": ["spec"]}
    assert gate({"schema": ok, "spec": idle}, required_gates=["schema", "spec"])["passed"]
    assert gate({})["missing_gates"] == ["mcp_tool_schema", "mcp_tool_correctness"]

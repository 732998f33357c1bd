"""Issue 21, class 5, in the engine: a run that started always ends with a record that says how,
whatever raised (a step's unstorable output, the engine's own observers, the store)."""

from __future__ import annotations

from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.records import RUNNING, InstanceRecord, MemoryInstances
from agent_env.tasks.steps import Step

from .test_engine import REGISTRY, ctx, spec


class Unstorable(Step):
    type = "unstorable"

    async def run(self, context: TaskContext) -> None:
        context.outputs[self.id] = {"score": float("nan")}


class RefusesBigRecords(MemoryInstances):
    """A store that, like DynamoDB past its item limit, refuses a record with a large context."""

    def save(self, record: InstanceRecord) -> None:
        if len(repr(record.context)) > 200:
            raise ValueError("item size has exceeded the maximum allowed size")
        super().save(record)


async def test_a_nan_output_fails_its_step_by_name_and_the_record_ends() -> None:
    store = MemoryInstances()
    task = TaskSpec("t", "tasks/t.json", [{"type": "note", "id": "a"},
                                          {"type": "unstorable", "id": "bad"}])
    result = await run_task(task, ctx(), registry={**REGISTRY, "unstorable": Unstorable},
                            instances=store, emit=lambda *a, **k: None)
    assert result.outcome == "failed"
    record = store.records["t-12345678"]
    assert record.status != RUNNING
    assert [f.step_id for f in record.failures] == ["bad"]
    assert "outputs.bad.score is nan (JSON has no NaN or infinity)" in record.failures[0].error
    assert "bad" not in record.context.get("outputs", {})  # the value itself never stored


async def test_an_observer_raising_ends_the_run_as_an_infra_error_with_its_record() -> None:
    store = MemoryInstances()

    def emit(kind: str, *args: object, **fields: object) -> None:
        if kind == "step_started" and fields.get("step_id") == "b":
            raise RuntimeError("observer broke")

    result = await run_task(spec({"id": "a"}, {"id": "b"}), ctx(), registry=REGISTRY,
                            instances=store, emit=emit)
    assert result.outcome == "error"
    record = store.records["t-12345678"]
    assert record.status != RUNNING and record.completed_steps == ["a"]
    failure = record.failures[0]
    assert (failure.step_id, failure.is_infra) == ("b", True)
    assert "the run stopped: observer broke" in failure.error


async def test_a_store_refusing_a_grown_context_keeps_the_outcome() -> None:
    store = RefusesBigRecords()

    class Grows(Step):
        type = "grows"

        async def run(self, context: TaskContext) -> None:
            context.outputs[self.id] = "y" * 300

    task = TaskSpec("t", "tasks/t.json", [{"type": "note", "id": "a"},
                                          {"type": "grows", "id": "big"}])
    result = await run_task(task, ctx(), registry={**REGISTRY, "grows": Grows},
                            instances=store, emit=lambda *a, **k: None)
    record = store.records["t-12345678"]
    assert record.status == "completed" and record.outcome == result.outcome
    assert "could not be recorded: item size" in record.context["not_stored"]

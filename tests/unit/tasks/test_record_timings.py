"""What a run record keeps for the explorer: each step's start, duration and outcome in the
task's order, and the run's agents and models as top-level fields a store query can filter on."""

from __future__ import annotations

from pathlib import Path

from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.tasks.engine import run_task
from agent_env.tasks.records import InstanceRecord, StoredInstances

from .test_engine import REGISTRY, ctx, spec


async def test_step_timings_follow_the_tasks_order_with_outcomes(tmp_path: Path) -> None:
    documents = SqliteDocumentStore(tmp_path / "documents.sqlite3")
    store = StoredInstances(documents)
    # z runs first, a after it: the record keeps the task's order, not the names'
    result = await run_task(spec({"id": "z", "sleep": 0.05}, {"id": "a", "depends_on": ["z"]},
                                 {"id": "m", "depends_on": ["a"], "fail_times": 1}),
                            ctx(), registry=REGISTRY, instances=store, emit=lambda *a, **k: None)
    record = store.get(result.instance_id)
    assert record is not None
    assert [(t["step_id"], t["outcome"]) for t in record.step_timings] == [
        ("z", "completed"), ("a", "completed"), ("m", "failed")]
    assert record.step_timings[0]["duration_seconds"] >= 0.05
    assert all(t["started_at_utc"] >= record.started_at_utc for t in record.step_timings)
    assert record.step_timings[0]["started_at_utc"] <= record.step_timings[1]["started_at_utc"]
    documents.close()


def test_agents_and_models_are_filterable_fields(tmp_path: Path) -> None:
    documents = SqliteDocumentStore(tmp_path / "documents.sqlite3")
    store = StoredInstances(documents)
    record = InstanceRecord("i-1", "t", 1, "completed", "2026-12-04T00:00:00Z", context={
        "agents": {"coder": {"agent": "codex", "model": "gpt-x"},
                   "critic": {"agent": "claude-code", "model": "gpt-x"}}})
    store.save(record)
    store.save(InstanceRecord("i-2", "t", 1, "completed", "2026-12-04T00:00:01Z"))
    assert documents.query("task_instances", {"agents": "claude-code,codex"})[0]["_id"] == "i-1"
    assert [d["_id"] for d in documents.query("task_instances", {"models": "gpt-x"})] == ["i-1"]
    assert store.get("i-2").agents is None  # no agent: nothing to filter by
    assert store.get("i-1").context["agents"]["coder"]["agent"] == "codex"  # read back whole
    documents.close()


def test_an_eval_runs_group_and_eval_are_filterable_fields(tmp_path: Path) -> None:
    documents = SqliteDocumentStore(tmp_path / "documents.sqlite3")
    store = StoredInstances(documents)
    store.save(InstanceRecord("i-1", "t", 1, "completed", "2026-12-04T00:00:00Z", context={
        "metadata": {"run_group_id": "evalrun-1", "eval_id": "smoke", "seed": {"n": 1}}}))
    store.save(InstanceRecord("i-2", "t", 1, "completed", "2026-12-04T00:00:01Z",
                              context={"metadata": {"run_group_id": "taskrun-2"}}))
    assert [d["_id"] for d in documents.query("task_instances", {"eval_id": "smoke"})] == ["i-1"]
    assert [d["_id"] for d in documents.query("task_instances",
                                              {"run_group_id": "taskrun-2"})] == ["i-2"]
    documents.close()

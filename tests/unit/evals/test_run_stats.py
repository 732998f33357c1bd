"""A run group's counters (agent_env.evals.stats) in the real document store: each finished slot
counted once, a slot finished again counted with its new outcome only, a group from before the
counters counted once from its records, and distributions kept in buckets."""

from __future__ import annotations

from pathlib import Path

from agent_env.evals.compare import group_counters
from agent_env.evals.groups import Group, GroupStore, Slot
from agent_env.evals.stats import RunSummary, buckets, merged_hist


def group(store: GroupStore, group_id: str, tasks: int = 2) -> Group:
    made = Group(group_id, "eval", "suite", 1, 1,
                 tuple(Slot(i, f"t{i}", 1, 1) for i in range(tasks)))
    store.create(made)
    return made


def test_each_finished_run_is_counted_once_and_a_retry_replaces_it(state_root: Path) -> None:
    from agent_env.runtime import current

    documents = current().document_store
    store = GroupStore(documents)
    made = group(store, "evalrun-count1")
    first, second = made.slots
    store.claim(made, first)
    store.finish(made, first, "i-1", "error", ["i-1"], RunSummary("t0", 1, "error"))
    store.claim(made, second)
    store.finish(made, second, "i-2", "passed", ["i-2"], RunSummary(
        "t1", 1, "passed", "model-agent", "big", 1.0, 2.5, 1200, 0.004))
    rows = {r.task_id: r for r in group_counters(documents, "evalrun-count1")}
    assert (rows["t0"].runs, rows["t0"].errors, rows["t0"].n) == (1, 1, 0)
    assert (rows["t1"].n, rows["t1"].c, rows["t1"].mean("seconds")) == (1, 1, 2.5)
    # the errored slot run again (--resume): its error is taken back, the pass counted
    store.claim(made, first)
    store.finish(made, first, "i-3", "passed", ["i-1", "i-3"], RunSummary(
        "t0", 1, "passed", "model-agent", "big", 1.0, 0.5, 90, 0.0001))
    rows_after = group_counters(documents, "evalrun-count1")
    errored = [r for r in rows_after if r.task_id == "t0" and r.model == "-"]
    assert [(r.runs, r.errors) for r in errored] == [(0, 0)]
    passed = [r for r in rows_after if r.model == "big"]
    assert sum(r.n for r in passed) == 2 and sum(r.c for r in passed) == 2
    assert merged_hist(passed, "seconds") == [0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]  # 0.5 s, 2.5 s
    assert merged_hist(passed, "score")[10] == 2
    assert buckets("seconds")[:3] == ["< 0.1", "0.1-0.3", "0.3-1"]


def test_a_group_from_before_the_counters_is_counted_once(state_root: Path) -> None:
    from agent_env.runtime import current
    from agent_env.tasks.records import InstanceRecord, StoredInstances

    documents = current().document_store
    made = Group("evalrun-legacy", "eval", "suite", 1, 1, (Slot(0, "t0", 1, 1),))
    # as an older AgentEnv wrote them: no counters flag, a done slot without a summary
    documents.insert("eval_run_groups", made.to_document())
    documents.insert("eval_run_slots", {"_id": "evalrun-legacy#0", "group": "evalrun-legacy",
                                        "index": 0, "state": "done", "owner": "old", "rev": 2,
                                        "instance_id": "i-9", "outcome": "failed",
                                        "attempts": ["i-9"]})
    StoredInstances(documents).save(InstanceRecord(
        "i-9", "t0", 1, "completed", "2026-12-06T00:00:00+00:00", outcome="failed",
        scores={"v": 0.25}, duration_seconds=4.0,
        context={"agents": {"agent": {"agent": "model-agent", "model": "small"}}}))
    for _ in range(2):  # read twice: counted the first time only
        (row,) = group_counters(documents, "evalrun-legacy")
    assert (row.model, row.n, row.c, row.mean("score"), row.mean("seconds")) == (
        "small", 1, 0, 0.25, 4.0)


def test_a_finish_without_numbers_reads_them_from_the_record(state_root: Path) -> None:
    from agent_env.runtime import current
    from agent_env.tasks.records import InstanceRecord, StoredInstances

    documents = current().document_store
    store = GroupStore(documents)
    made = group(store, "evalrun-record", tasks=1)
    StoredInstances(documents).save(InstanceRecord(
        "i-7", "t0", 1, "completed", "2026-12-06T00:00:00+00:00", outcome="passed",
        scores={"v": 1.0}, duration_seconds=0.2,
        context={"agents": {"agent": {"agent": "codex", "model": "big"}}}))
    store.claim(made, made.slots[0])
    store.finish(made, made.slots[0], "i-7", "passed", ["i-7"])
    (row,) = group_counters(documents, "evalrun-record")
    assert (row.agent, row.model, row.c, row.mean("seconds")) == ("codex", "big", 1, 0.2)

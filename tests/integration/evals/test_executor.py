"""The eval executor on the real engine and document store: retries, claims, resume, table."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from agent_env.errors import UserError
from agent_env.evals.execute import Executor, LocalRunner
from agent_env.evals.groups import Group, GroupStore, Slot, new_group_id
from agent_env.evals.report import summarise, table_lines
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.records import StoredInstances
from agent_env.tasks.scores import ScoreRow
from agent_env.tasks.session import RunRequest
from agent_env.tasks.steps import InfraError, Step


@attrs.define(kw_only=True)
class Scripted(Step):
    """A test step: per call of each sample, raises an infra error or scores, as scripted."""

    type = "scripted"
    calls: ClassVar[dict[str, int]] = {}
    #: "<sample>": the outcomes of its attempts in order ("infra", "pass", "fail", "wait")
    script: dict[str, list[str]] = attrs.field(factory=dict)

    async def run(self, ctx: TaskContext) -> None:
        sample = str(ctx.metadata["sample"])
        attempt = self.calls.get(sample, 0)
        self.calls[sample] = attempt + 1
        plan = self.script.get(sample, ["pass"])
        what = plan[min(attempt, len(plan) - 1)]
        if what == "infra":
            raise InfraError("the sandbox host went away")
        if what == "wait":
            await asyncio.sleep(30)
        score = 1.0 if what == "pass" else 0.0
        ctx.record_verification(self, self.id, [ScoreRow(0, score, score >= 1)], "all_pass")


@pytest.fixture
def stores(state_root: Path) -> tuple[GroupStore, StoredInstances]:
    from agent_env.runtime import current

    Scripted.calls.clear()
    return GroupStore(current().document_store), StoredInstances(current().document_store)


def make(k: int, script: dict[str, list[str]], tasks: int = 1) -> tuple[Group, Any]:
    slots = tuple(Slot(t * k + s, f"t{t}", 1, s + 1) for t in range(tasks) for s in range(k))
    group = Group(new_group_id(), "eval", "e", 1, k, slots)
    spec = TaskSpec("t", "t", [{"id": "v", "type": "scripted", "script": script}], 1)

    def build(slot: Slot) -> RunRequest:
        return RunRequest(attrs.evolve(spec, id=slot.task_id), MemoryArtifacts(),
                          {"sample": f"{slot.task_id}/{slot.sample}"})

    return group, build


def executor(group: Group, build: Any, stores: Any, *, retries: int = 1,
             concurrency: int = 4) -> Executor:
    groups, instances = stores
    runner = LocalRunner(instances, registry={"scripted": Scripted})
    return Executor(group, groups, runner, build, instances, max_concurrency=concurrency,
                    retries=retries)


async def test_an_infra_error_is_retried_then_reported_apart(stores) -> None:
    group, build = make(4, {"t0/1": ["infra", "pass"], "t0/2": ["infra"], "t0/3": ["fail"]})
    groups, _ = stores
    groups.create(group)
    outcome = await executor(group, build, stores).run()
    by_sample = {r.slot.sample: r for r in outcome.runs}
    assert by_sample[1].outcome == "passed" and len(by_sample[1].attempts) == 2
    assert by_sample[2].outcome == "error" and len(by_sample[2].attempts) == 2  # 1 + 1 retry
    assert by_sample[3].outcome == "scored below 1" and len(by_sample[3].attempts) == 1
    (row,) = summarise(group, outcome.runs)
    # the error is left out of pass@k: n = 3 completed, c = 2 passed
    assert (row.runs, row.passed, row.failed, row.errors) == (4, 2, 1, 1)
    assert row.pass_at[1] == pytest.approx(2 / 3) and row.pass_at[4] is None
    lines = table_lines(group, [row])
    assert lines[0].split() == ["TASK", "VERSION", "RUNS", "PASSED", "FAILED", "ERRORS", "MEAN",
                                "SCORE", "PASS@1", "PASS@4"]
    assert lines[1].split() == ["t0", "v1", "4", "2", "1", "1", "0.67", "0.67", "-"]
    assert "pass@4 has no estimate for t0" in lines[3]
    assert "1 run ended in an infrastructure error: not scored" in lines[4]


async def test_no_retries_means_one_attempt(stores) -> None:
    group, build = make(1, {"t0/1": ["infra", "pass"]})
    stores[0].create(group)
    (run,) = (await executor(group, build, stores, retries=0).run()).runs
    assert run.outcome == "error" and Scripted.calls == {"t0/1": 1}


async def test_a_resume_reuses_completed_runs_and_reruns_errors(stores) -> None:
    group, build = make(3, {"t0/2": ["infra", "infra", "pass"]})
    stores[0].create(group)
    first = await executor(group, build, stores).run()
    assert [r.outcome for r in first.runs] == ["passed", "error", "passed"]
    second = executor(group, build, stores)
    second.check_resume()
    again = await second.run()
    assert [(r.outcome, r.reused) for r in again.runs] == [
        ("passed", True), ("passed", False), ("passed", True)]
    assert Scripted.calls == {"t0/1": 1, "t0/2": 3, "t0/3": 1}


async def test_two_processes_never_run_one_slot_twice(stores) -> None:
    group, build = make(6, {}, tasks=2)
    stores[0].create(group)
    from agent_env.runtime import current

    other = GroupStore(current().document_store)  # a second owner, as another process would be
    first = executor(group, build, stores, concurrency=2)
    second = Executor(group, other, LocalRunner(stores[1], registry={"scripted": Scripted}),
                      build, stores[1], max_concurrency=2, retries=1)
    a, b = await asyncio.gather(first.run(), second.run())
    ran = [r for r in a.runs + b.runs if not r.reused]
    assert sorted(r.slot.index for r in ran) == list(range(12))
    assert set(Scripted.calls.values()) == {1}
    # each waited for the other's slots, so both report the whole group
    assert [r.slot.index for r in a.runs] == [r.slot.index for r in b.runs] == list(range(12))
    assert a.busy + b.busy >= 1 and a.not_run == b.not_run == 0


async def test_a_stop_releases_the_runs_in_flight_for_a_resume(stores) -> None:
    group, build = make(4, {"t0/3": ["wait", "pass"], "t0/4": ["wait", "pass"]})
    stores[0].create(group)
    first = executor(group, build, stores, concurrency=2)
    running = asyncio.ensure_future(first.run())
    while sum(Scripted.calls.values()) < 4:
        await asyncio.sleep(0.01)
    first.stop("Ctrl-C")
    stopped = await running
    assert [r.slot.sample for r in stopped.runs] == [1, 2] and stopped.not_run == 2
    resumed = await executor(group, build, stores).run()
    assert [(r.slot.sample, r.reused) for r in resumed.runs] == [
        (1, True), (2, True), (3, False), (4, False)]


async def test_a_corrupt_stored_result_stops_a_resume_before_it_runs(stores) -> None:
    group, build = make(2, {})
    groups, _ = stores
    groups.create(group)
    await executor(group, build, stores).run()
    from agent_env.runtime import current

    docs = current().document_store
    instance = groups.slot_documents(group)[0]["instance_id"]
    docs.update("task_instances", {"_id": instance}, {"$set": {"scores": "not a mapping"}})
    calls = dict(Scripted.calls)
    with pytest.raises(UserError, match=r"the stored result of t0 v1 #1 .* is corrupt"):
        executor(group, build, stores).check_resume()
    assert Scripted.calls == calls

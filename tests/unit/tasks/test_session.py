"""Sessions run at most 4 tasks at once and cancel every run, started or waiting."""

from __future__ import annotations

import asyncio

import attrs

from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.records import MemoryInstances
from agent_env.tasks.session import RunRequest, Session
from agent_env.tasks.steps import Step

ACTIVE = {"now": 0, "most": 0}


@attrs.define(kw_only=True)
class Busy(Step):
    type = "busy"
    sleep: float = 0.05

    async def run(self, ctx) -> None:
        ACTIVE["now"] += 1
        ACTIVE["most"] = max(ACTIVE["most"], ACTIVE["now"])
        try:
            await asyncio.sleep(self.sleep)
        finally:
            ACTIVE["now"] -= 1


def requests(count: int, sleep: float) -> list[RunRequest]:
    return [RunRequest(TaskSpec(f"t{i}", f"tasks/t{i}.json",
                                [{"id": "a", "type": "busy", "sleep": sleep}]), MemoryArtifacts())
            for i in range(count)]


async def test_at_most_four_tasks_at_once():
    session = Session(instances=MemoryInstances(), registry={"busy": Busy})
    results = await session.run_all(requests(9, 0.05))
    assert ACTIVE["most"] == 4
    assert [r.outcome for r in results] == ["unscored"] * 9


async def test_cancel_reaches_running_and_waiting_tasks():
    instances = MemoryInstances()
    session = Session(instances=instances, registry={"busy": Busy})
    running = asyncio.ensure_future(session.run_all(requests(6, 10)))
    await asyncio.sleep(0.05)
    session.cancel("Ctrl-C")
    results = await running
    assert [r.outcome for r in results] == ["cancelled"] * 6
    assert results[0].describe() == "cancelled by Ctrl-C"
    assert {r.status for r in instances.records.values()} == {"cancelled"}
    assert len(instances.records) == 6


async def test_a_session_cancelled_before_it_runs_records_every_run_cancelled():
    """What a remote runner's node does with a run the driver cancelled before it had a slot:
    the run is recorded ``cancelled`` and returned, not raised as asyncio's CancelledError."""
    instances = MemoryInstances()
    session = Session(instances=instances, registry={"busy": Busy})
    session.cancel("Ctrl-C")
    results = await session.run_all(requests(3, 10))
    assert [r.outcome for r in results] == ["cancelled"] * 3
    assert {r.status for r in instances.records.values()} == {"cancelled"}
    assert len(instances.records) == 3


async def test_cancel_right_after_the_runs_are_scheduled_still_records_them():
    instances = MemoryInstances()
    session = Session(instances=instances, registry={"busy": Busy})
    running = asyncio.ensure_future(session.run_all(requests(3, 10)))
    await asyncio.sleep(0)  # run_all has scheduled its runs; none has taken a step yet
    session.cancel("SIGTERM")
    results = await running
    assert [r.outcome for r in results] == ["cancelled"] * 3
    assert [r.describe() for r in results] == ["cancelled by SIGTERM"] * 3

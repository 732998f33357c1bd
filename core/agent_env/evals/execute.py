"""Running a group's slots: at most M at once, infra errors retried, Ctrl-C stopping cleanly.

Each slot is claimed (see :mod:`agent_env.evals.groups`), run through the runner seam, retried
while it ends in ``error`` (up to ``retries`` more times, each a new instance) and recorded.
:class:`Runner` is the seam, the selected runner of :mod:`agent_env.runners` (``local``: each
request run here by the engine and torn down as soon as it ends, so a long eval never holds
more than M runs' sandboxes). Each slot's start and end are run events (``slot_started``,
``slot_finished``), which the terminal reporter prints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import attrs

from agent_env.evals.groups import Group, GroupStore, Slot
from agent_env.evals.report import EvalRun, result_from_record
from agent_env.runners import Runner
from agent_env.runners.local import LocalRunner as LocalRunner  # its home before runners
from agent_env.tasks import scores
from agent_env.tasks.engine import emit_event
from agent_env.tasks.session import RunRequest
from agent_env.tasks.teardown import TeardownReport

#: how often a slot another process holds is looked at again
POLL_SECONDS = 0.2


@attrs.define
class Outcome:
    """What executing a group produced (``busy``: slots another process held, whose results
    were waited for)."""

    runs: list[EvalRun]
    busy: int = 0
    not_run: int = 0
    torn_down: dict[str, int] = attrs.field(factory=dict)
    teardown_failed: list[str] = attrs.field(factory=list)


class Executor:
    def __init__(self, group: Group, store: GroupStore, runner: Runner,
                 build: Callable[[Slot], RunRequest], instances: Any, *,
                 max_concurrency: int, retries: int) -> None:
        self.group, self.store, self.runner, self.build = group, store, runner, build
        self.instances = instances
        self.max_concurrency, self.retries = max_concurrency, retries
        self.stopping: str | None = None
        self.outcome = Outcome([])

    def stop(self, reason: str) -> None:
        """Start no more runs; cancel those in flight (they are released for a resume)."""
        self.stopping = reason
        self.runner.cancel(reason)

    def reuse(self, slot: Slot, document: Any) -> EvalRun:
        from agent_env.errors import UserError

        instance_id = str(document.get("instance_id"))
        try:
            record = self.instances.get(instance_id)
        except Exception as exc:
            raise UserError(f"the stored result of {slot.label} ({instance_id}) is corrupt: "
                            f"{exc}") from None
        if record is None:
            raise UserError(f"the stored result of {slot.label} ({instance_id}) is missing")
        result = result_from_record(record, f"{slot.task_id} #{slot.sample}")
        return EvalRun(slot, result, record, tuple(document.get("attempts") or [instance_id]),
                       reused=True)

    def check_resume(self) -> None:
        """Before a resume runs anything: every finished slot's stored result reads back."""
        for index, document in self.store.slot_documents(self.group).items():
            if document.get("state") == "done" and 0 <= index < len(self.group.slots):
                from agent_env.tasks.scores import COMPLETED

                if document.get("outcome") in COMPLETED:
                    self.reuse(self.group.slots[index], document)

    async def run(self) -> Outcome:
        slots = asyncio.Semaphore(self.max_concurrency)
        try:
            await asyncio.gather(*(self._slot(slot, slots) for slot in self.group.slots))
        finally:
            await self.runner.close()
        self.outcome.runs.sort(key=lambda r: r.slot.index)
        return self.outcome

    async def _slot(self, slot: Slot, slots: asyncio.Semaphore) -> None:
        waited = False
        while True:
            async with slots:
                if self.stopping is not None:
                    self.outcome.not_run += 1
                    return
                claim = self.store.claim(self.group, slot)
                if claim.state == "done":
                    run = self.reuse(slot, claim.document)
                    self.outcome.runs.append(run)
                    self._finished(run)
                    return
                if claim.state == "mine":
                    await self._run_claimed(slot)
                    return
            # another process runs this slot: wait for its result (or for it to go away)
            if not waited:
                waited = True
                self.outcome.busy += 1
            await asyncio.sleep(POLL_SECONDS)

    async def _run_claimed(self, slot: Slot) -> None:
        attempts: list[str] = []
        while True:
            emit_event("slot_started", "", slot.task_id,
                       detail={"label": slot.label, "group": self.group.group_id})
            result, report = await self.runner.run(self.build(slot))
            self._count_teardown(report)
            attempts.append(result.instance_id)
            retry = (result.outcome == scores.ERROR and len(attempts) <= self.retries
                     and self.stopping is None)
            record = self.instances.get(result.instance_id) if self.instances else None
            run = EvalRun(slot, result, record, tuple(attempts))
            self._finished(run, retrying=retry)
            if not retry:
                break
        if result.outcome == "cancelled":
            self.store.release(self.group, slot)
            self.outcome.not_run += 1
            return
        from agent_env.evals.stats import run_summary

        self.store.finish(self.group, slot, result.instance_id, result.outcome, attempts,
                          run_summary(slot.task_id, slot.task_version, result.outcome, record))
        self.outcome.runs.append(run)

    def _finished(self, run: EvalRun, retrying: bool = False) -> None:
        """Tell the run-event observers (the terminal reporter, ...) a slot's run ended."""
        result = run.result
        emit_event("slot_finished", result.instance_id, run.slot.task_id, outcome=run.outcome,
                   duration_seconds=result.duration_seconds,
                   detail={"label": run.slot.label, "group": self.group.group_id,
                           "described": result.describe(), "attempts": len(run.attempts),
                           "retrying": retrying, "reused": run.reused})

    def _count_teardown(self, report: TeardownReport) -> None:
        for item in report.terminated:
            self.outcome.torn_down[item.kind] = self.outcome.torn_down.get(item.kind, 0) + 1
        self.outcome.teardown_failed += [f"{i.label}: {i.error}" for i in report.failed]

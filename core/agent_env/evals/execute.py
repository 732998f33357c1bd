"""Running a group's slots: at most M at once, infra errors retried, Ctrl-C stopping cleanly.

Each slot is claimed (see :mod:`agent_env.evals.groups`), run through the runner seam, retried
while it ends in ``error`` (up to ``retries`` more times, each a new instance) and recorded.
:class:`Runner` is the seam, the selected runner of :mod:`agent_env.runners` (``local``: each
request run here by the engine and torn down as soon as it ends, so a long eval never holds
more than M runs' sandboxes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from agent_env.evals.groups import Group, GroupStore, Slot
from agent_env.evals.report import EvalRun, result_from_record
from agent_env.runners import Runner
from agent_env.runners.local import LocalRunner as LocalRunner  # its home before runners
from agent_env.tasks import scores
from agent_env.tasks.session import RunRequest
from agent_env.tasks.teardown import TeardownReport

#: how often a slot another process holds is looked at again
POLL_SECONDS = 0.2


class Progress(Protocol):
    def started(self, slot: Slot) -> None: ...

    def finished(self, run: EvalRun, retrying: bool = False) -> None: ...

    def close(self) -> None: ...


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
                 max_concurrency: int, retries: int, progress: Progress | None = None) -> None:
        self.group, self.store, self.runner, self.build = group, store, runner, build
        self.instances = instances
        self.max_concurrency, self.retries = max_concurrency, retries
        self.progress: Progress = progress or PlainProgress(len(group.slots), lambda _: None)
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
                    self.progress.finished(run)
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
            self.progress.started(slot)
            result, report = await self.runner.run(self.build(slot))
            self._count_teardown(report)
            attempts.append(result.instance_id)
            retry = (result.outcome == scores.ERROR and len(attempts) <= self.retries
                     and self.stopping is None)
            record = self.instances.get(result.instance_id) if self.instances else None
            run = EvalRun(slot, result, record, tuple(attempts))
            self.progress.finished(run, retrying=retry)
            if not retry:
                break
        if result.outcome == "cancelled":
            self.store.release(self.group, slot)
            self.outcome.not_run += 1
            return
        self.store.finish(self.group, slot, result.instance_id, result.outcome, attempts)
        self.outcome.runs.append(run)

    def _count_teardown(self, report: TeardownReport) -> None:
        for item in report.terminated:
            self.outcome.torn_down[item.kind] = self.outcome.torn_down.get(item.kind, 0) + 1
        self.outcome.teardown_failed += [f"{i.label}: {i.error}" for i in report.failed]


# -- progress -------------------------------------------------------------------------------------


class PlainProgress:
    """One line per finished run (a pipe, a log file)."""

    def __init__(self, total: int, write: Callable[[str], None]) -> None:
        self.total, self.write = total, write
        self.done = 0

    def started(self, slot: Slot) -> None:
        pass

    def line(self, run: EvalRun, retrying: bool) -> str:
        how = run.result.describe()
        took = f"{run.result.duration_seconds:.1f}s"
        if retrying:
            return f"[{run.slot.label}] {how}, {took}; retrying (attempt {len(run.attempts) + 1})"
        reused = " (reused)" if run.reused else ""
        return (f"[{run.slot.label}] {how}, {took}{reused} ({self.done}/{self.total}, "
                f"instance {run.result.instance_id})")

    def finished(self, run: EvalRun, retrying: bool = False) -> None:
        if not retrying:
            self.done += 1
        self.write(self.line(run, retrying))

    def close(self) -> None:
        pass


class LiveProgress(PlainProgress):
    """On a terminal: one status line redrawn in place (done, running, failed, errors, ETA);
    runs that did not pass leave a permanent line above it."""

    def __init__(self, total: int, write: Callable[[str], None], stream: Any) -> None:
        super().__init__(total, write)
        self.stream = stream
        self.running = 0
        self.failed = 0
        self.errors = 0
        self.fresh = 0
        self.started_at = time.monotonic()
        self.ticker: asyncio.Task[None] | None = None

    def status(self) -> str:
        import shutil

        elapsed = time.monotonic() - self.started_at
        left = self.total - self.done
        eta = f", ETA {elapsed / self.fresh * left:.0f}s" if self.fresh and left else ""
        text = (f"{self.done}/{self.total} done, {self.running} running, {self.failed} failed, "
                f"{self.errors} errors, {elapsed:.0f}s{eta}")
        return text[: shutil.get_terminal_size((100, 20)).columns - 1]

    def redraw(self) -> None:
        self.stream.write("\r\x1b[K" + self.status())
        self.stream.flush()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            self.redraw()

    def started(self, slot: Slot) -> None:
        if self.ticker is None:
            self.ticker = asyncio.ensure_future(self._tick())
        self.running += 1
        self.redraw()

    def finished(self, run: EvalRun, retrying: bool = False) -> None:
        if not run.reused:
            self.running -= 1
        if not retrying:
            self.done += 1
            self.fresh += 0 if run.reused else 1
            self.failed += run.outcome not in {*scores.SUCCESS, scores.ERROR}
            self.errors += run.outcome == scores.ERROR
        if retrying or run.outcome not in scores.SUCCESS:
            self.stream.write("\r\x1b[K")
            self.write(self.line(run, retrying))
        self.redraw()

    def close(self) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
        self.stream.write("\r\x1b[K")
        self.stream.flush()

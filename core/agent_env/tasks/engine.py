"""The task engine: runs a task's steps as a DAG and records what happened.

Ready steps run concurrently. The first fatal failure stops new dispatch, waits for the steps in
flight and is recorded; a tolerant failure (``fail_task_on_error: false``) unblocks dependents
but still fails the outcome; a failing step with ``retry_config`` rolls back its span (the
retry-from step and everything depending on it) and dispatches it again, up to
``max_retries`` times. Cancelling the engine cancels the steps in flight and records
``cancelled``. The engine never tears anything down: its caller does (see
:mod:`agent_env.tasks.teardown`).

Whatever happens once the run started, its record is written again at the end: a step whose
outputs no store can hold fails with :class:`~agent_env.tasks.steps.UnstorableValue`; an
exception from the engine's own machinery (a run-event hook, the record's snapshot) ends the
run as ``error`` naming it; a store that refuses the final record gets one without the
context. Only then does a non-``Exception`` (``SystemExit``...) go on up, so the
caller's ``finally`` tears down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from agent_env.errors import UserError, cause
from agent_env.tasks import records, scores
from agent_env.tasks.context import TaskContext
from agent_env.tasks.plan import TaskSpec, apply_seed, descendants, effective_dependencies
from agent_env.tasks.records import FailureRecord, InstanceRecord, InstanceStore
from agent_env.tasks.steps import InfraError, Step, StepError, UnstorableValue, structure_step


@attrs.define
class TaskResult:
    """How one run of a task ended."""

    task: TaskSpec
    instance_id: str
    outcome: str
    scores: dict[str, float]
    failures: list[FailureRecord]
    completed_steps: list[str]
    duration_seconds: float
    retried_failures: list[FailureRecord] = attrs.field(factory=list)
    cancel_reason: str | None = None

    @property
    def first_fatal(self) -> FailureRecord | None:
        """The failure that ended the run: an infrastructure one first, as it decides ``error``."""
        fatal = sorted((f for f in self.failures if f.is_fatal), key=lambda f: not f.is_infra)
        return fatal[0] if fatal else (self.failures[0] if self.failures else None)

    def describe(self) -> str:
        """``passed (hello: 1)``, ``failed at step 'v': RuntimeError: boom``, ``cancelled``."""
        if self.outcome == scores.FAILED and self.first_fatal is not None:
            return f"failed at step '{self.first_fatal.step_id}': {self.first_fatal.summary}"
        if self.outcome == scores.ERROR and self.first_fatal is not None:
            return (f"error (infrastructure, not scored) at step '{self.first_fatal.step_id}': "
                    f"{self.first_fatal.summary}")
        if self.outcome == scores.CANCELLED and self.cancel_reason:
            return f"cancelled by {self.cancel_reason}"
        if self.scores:
            return f"{self.outcome} ({scores.format_scores(self.scores)})"
        return self.outcome


def is_infra(exc: BaseException) -> bool:
    """Whether a step's exception was infrastructure's doing (an ``error`` run, not a failure)."""
    from agent_env.sandbox.base import SandboxError

    return isinstance(exc, InfraError | SandboxError)


def is_plain(exc: BaseException) -> bool:
    """Whether an exception's message is written for the user as it is (ours, and a sandbox's
    own errors, which name what went wrong); any other shows its kind too, which a bug report
    needs."""
    from agent_env.sandbox.base import SandboxError

    return isinstance(exc, StepError | UserError | SandboxError)


def build_steps(task: TaskSpec, registry: Mapping[str, type[Step]], seed: Any) -> list[Step]:
    """The task's step objects with ``<k>`` seed placeholders replaced."""
    raw_steps = apply_seed([dict(s) for s in task.raw_steps], seed or {})
    steps = []
    for raw in raw_steps:
        try:
            steps.append(structure_step(registry[raw["type"]], raw))
        except (KeyError, ValueError) as exc:
            raise UserError(f"{task.label}: step '{raw.get('id')}': {exc}") from None
    return steps


def emit_event(kind: str, instance_id: str, task_id: str, **fields: Any) -> None:
    """Deliver one run event, stamped now, to every ``agent_env_run_event`` observer."""
    from agent_env.events import RunEvent
    from agent_env.runtime import current

    current().host.emit(RunEvent(kind, instance_id, task_id, records.utc_now(), **fields))


def _emit(kind: str, ctx: TaskContext, **fields: Any) -> None:
    emit_event(kind, ctx.instance_id, ctx.task_id, **fields)


async def run_task(
    task: TaskSpec,
    ctx: TaskContext,
    *,
    registry: Mapping[str, type[Step]] | None = None,
    instances: InstanceStore | None = None,
    emit: Callable[..., None] = _emit,
) -> TaskResult:
    """Run ``task`` in ``ctx``; returns its result (also on cancellation), never tears down."""
    if registry is None:
        from agent_env.runtime import current

        registry = current().host.registry("step_type")
    if ctx.note_sink is None:  # a step's progress line is a run event like the others
        ctx.note_sink = lambda text: emit("note", ctx, detail={"label": task.label,
                                                                "text": text})
    steps = build_steps(task, registry, ctx.seed)
    started_wall, started = records.utc_now(), time.monotonic()
    record = InstanceRecord(ctx.instance_id, task.id, task.version, records.RUNNING, started_wall,
                            owner=_owner())
    record.context = ctx.snapshot()
    if instances is not None:
        instances.save(record)
    run = _DagRun(task, steps, ctx, emit)
    cancelled = False
    crash: BaseException | None = None
    try:
        emit("run_started", ctx, detail={"label": task.label})
        run.start_preparing()
        await run.execute()
    except asyncio.CancelledError:
        cancelled = True
        await run.cancel_in_flight()
    except BaseException as exc:  # the engine's own machinery: recorded, then handled below
        crash = exc
        run.failures.append(run.crash_failure(exc))
        await run.cancel_in_flight()
    finally:
        await ctx.stop_watching()
        await run.stop_preparing()
    reported = scores.reported_scores(ctx.verifications)
    failed = bool(run.failures)
    errored = any(f.is_fatal and f.is_infra for f in run.failures)
    outcome = scores.outcome(cancelled=cancelled, failed=failed, scores=reported, errored=errored)
    duration = time.monotonic() - started
    result = TaskResult(
        task, ctx.instance_id, outcome, reported, run.failures, run.completed_in_order(),
        duration, run.retried, ctx.cancel_reason if cancelled else None,
    )
    record.status = (records.CANCELLED if cancelled else records.FAILED if failed
                     else records.COMPLETED)
    record.finished_at_utc = records.utc_now()
    record.outcome, record.scores = outcome, reported
    record.completed_steps, record.failures = result.completed_steps, run.failures
    record.step_timings = [run.timings[s.id] for s in run.steps if s.id in run.timings]
    record.retried_failures, record.cancel_reason = run.retried, result.cancel_reason
    record.sandboxes = list(ctx.sandbox_records)
    record.duration_seconds = round(duration, 3)
    if instances is not None:
        _save_final(instances, record, ctx)
    if crash is not None and not isinstance(crash, Exception):
        raise crash  # SystemExit and the like go on, the record written first
    error = result.first_fatal.summary if result.first_fatal else None
    try:
        emit("run_finished", ctx, outcome=outcome, duration_seconds=duration, error=error,
             detail={"label": task.label})
    except Exception:  # the run is over and recorded: a watcher failing changes nothing
        _report_failed()
    return result


def never_started(task: TaskSpec, ctx: TaskContext,
                  instances: InstanceStore | None) -> TaskResult:
    """Record a run cancelled before its first step (``ctx.cancel_reason`` says why) and return
    its result."""
    now = records.utc_now()
    reason = ctx.cancel_reason
    record = InstanceRecord(ctx.instance_id, task.id, task.version, records.CANCELLED, now,
                            now, scores.CANCELLED, cancel_reason=reason,
                            duration_seconds=0.0, context=ctx.snapshot())
    if instances is not None:
        instances.save(record)
    return TaskResult(task, ctx.instance_id, scores.CANCELLED, {}, [], [], 0.0,
                      cancel_reason=reason)


def _report_failed() -> None:
    from agent_env.logs import get_logger

    get_logger("tasks").warning("reporting a finished run failed", exc_info=True)


def _owner() -> str:
    from agent_env.sandbox.ownership import owner_label

    return owner_label()


def _save_final(instances: InstanceStore, record: InstanceRecord, ctx: TaskContext) -> None:
    """Write the run's end; a store refusing it gets the record without its context, so the run
    never stays ``running`` for want of an output."""
    try:
        record.context = ctx.snapshot()
        instances.save(record)
        return
    except Exception as exc:
        reason = cause(exc)
    record.context = {"not_stored": f"this run's context could not be recorded: {reason}"[:2000]}
    try:
        instances.save(record)
    except Exception as exc:  # the store is down: gc marks the record abandoned later
        ctx.note(f"could not record the run's end: {cause(exc)}")


class _DagRun:
    """The dispatch loop of one task run."""

    def __init__(
        self, task: TaskSpec, steps: Sequence[Step], ctx: TaskContext,
        emit: Callable[..., None],
    ) -> None:
        self.task, self.steps, self.ctx = task, list(steps), ctx
        self.emit = emit
        self.by_id = {step.id: step for step in steps}
        self.position = {step.id: i for i, step in enumerate(steps, start=1)}
        self.deps = effective_dependencies(steps)
        self.done: set[str] = set()
        self.completed: set[str] = set()
        #: step id -> when it (last) started, how long it took and how it ended
        self.timings: dict[str, dict[str, Any]] = {}
        self.failures: list[FailureRecord] = []
        self.retried: list[FailureRecord] = []
        self.retries_used: dict[str, int] = {}
        self.running: dict[asyncio.Task[FailureRecord | None], Step] = {}
        #: The step around which the engine's own machinery raised, if it did.
        self.crashed_at: str | None = None
        #: Each step's ``prepare``, running in the background (see :meth:`Step.prepare`).
        self.preparing: list[asyncio.Future[None]] = []

    def start_preparing(self) -> None:
        """Start every step's ``prepare`` that does something (the base one does nothing)."""
        self.preparing = [asyncio.ensure_future(self._prepare(step)) for step in self.steps
                          if type(step).prepare is not Step.prepare]

    async def _prepare(self, step: Step) -> None:
        try:
            await step.prepare(self.ctx)
        except Exception as exc:  # a warm-up that failed costs its gain, nothing more
            from agent_env.logs import get_logger

            get_logger("tasks").debug(f"step {step.id}: prepare failed", exc_info=exc)

    async def stop_preparing(self) -> None:
        for future in self.preparing:
            future.cancel()
        if self.preparing:
            await asyncio.gather(*self.preparing, return_exceptions=True)
        self.preparing = []

    def completed_in_order(self) -> list[str]:
        return [step.id for step in self.steps if step.id in self.completed]

    async def execute(self) -> None:
        resume = self.ctx.resume
        skipped = set(resume.skipped) if resume is not None else set()
        if resume is not None and skipped:  # a continued run: the saved run's outputs
            self.done |= skipped
            self.completed |= skipped
            first = self.steps[resume.start_step].id
            left = "; ".join(f"{kind} {', '.join(names)}"
                             for kind, names in resume.left_behind.items() if names)
            self.ctx.note(f"continuing at step {resume.start_step} ('{first}'): "
                          f"{len(skipped)} earlier step(s) taken from {resume.source}"
                          + (f" (not re-attached: {left})" if left else ""))
        pending = [step.id for step in self.steps if step.id not in skipped]
        stopped = False
        while True:
            if not stopped:
                for step_id in [s for s in pending if set(self.deps[s]) <= self.done]:
                    pending.remove(step_id)
                    step = self.by_id[step_id]
                    self.running[asyncio.ensure_future(self._run_one(step))] = step
            if not self.running:
                return
            waited: set[asyncio.Future[Any]] = {*self.running, *self.ctx.watches}
            done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            for watch in [f for f in done if f in self.ctx.watches]:
                why = self.ctx.live_report(watch)
                if why is not None and not stopped:
                    self.failures.append(self._went_down(why))
                    stopped = True
                    await self.cancel_in_flight()
            finished = [f for f in self.running if f in done]
            order = {f: self.position[self.running[f].id] for f in finished}
            for future in sorted(finished, key=order.__getitem__):
                done_step: Step | None = self.running.pop(future, None)
                if done_step is None:  # rolled back while it finished
                    continue
                step = done_step
                try:
                    failure = future.result()
                except BaseException:  # not the step: the machinery around it (run_task)
                    self.crashed_at = step.id
                    raise
                if failure is None:
                    self.done.add(step.id)
                    self.completed.add(step.id)
                elif not failure.is_fatal:
                    self.failures.append(failure)
                    self.done.add(step.id)
                elif not stopped and self._may_retry(step):
                    self.retried.append(failure)
                    pending = await self._roll_back(step, pending)
                else:
                    self.failures.append(failure)
                    stopped = True

    def _went_down(self, why: str) -> FailureRecord:
        """The failure a watch's report ends the run with: infrastructure's, on the step that
        was running (its own failure, if any, would only be a consequence)."""
        step = next(iter(self.running.values()), None)
        return FailureRecord(step.id if step else "-", step.type if step else "-",
                             self.ctx.strip_secrets(f"{why} (the run stopped)"), "EnvDown",
                             records.utc_now(), 0.0, True, is_infra=True, plain=True)

    def _may_retry(self, step: Step) -> bool:
        config = step.retry_config
        if config is None or self.retries_used.get(step.id, 0) >= config.max_retries:
            return False
        self.retries_used[step.id] = self.retries_used.get(step.id, 0) + 1
        return True

    async def _roll_back(self, step: Step, pending: list[str]) -> list[str]:
        """Undo the span from ``retry_from_step_id`` and queue it again."""
        assert step.retry_config is not None
        origin = step.retry_config.retry_from_step_id or step.id
        span = {origin, step.id} | descendants(self.deps, origin)
        in_flight = [f for f, s in self.running.items() if s.id in span]
        for future in in_flight:
            future.cancel()
            del self.running[future]
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
        for step_id in span:
            self.done.discard(step_id)
            self.completed.discard(step_id)
            self.ctx.forget_step(step_id)
        return sorted(set(pending) | span, key=self.position.__getitem__)

    def crash_failure(self, exc: BaseException) -> FailureRecord:
        """The failure an exception from the engine's machinery (not a step) is recorded as:
        infrastructure's, so the run is an ``error``, never a score."""
        from agent_env.logs import get_logger

        get_logger("tasks").debug("the run's machinery raised", exc_info=exc)
        step_id = self.crashed_at or next(
            (step.id for step in self.running.values()), "-")
        name = type(exc).__name__
        text = self.ctx.strip_secrets(str(exc))
        return FailureRecord(step_id, "-", f"the run stopped: {text}" if text else
                             "the run stopped", name, records.utc_now(), 0.0, True, is_infra=True,
                             plain=is_plain(exc))

    async def cancel_in_flight(self) -> None:
        for future in self.running:
            future.cancel()
        if self.running:
            await asyncio.gather(*self.running, return_exceptions=True)
        self.running.clear()

    async def _run_one(self, step: Step) -> FailureRecord | None:
        where = {"label": self.task.label, "position": self.position[step.id],
                 "total": len(self.steps)}
        self.emit("step_started", self.ctx, step_id=step.id, step_type=step.type, detail=where)
        started_wall, started = records.utc_now(), time.monotonic()
        failure = None
        try:
            await step.run(self.ctx)
            problem = self.ctx.storage_problem()
            if problem is not None:
                self.ctx.forget_step(step.id)
                raise UnstorableValue(f"it produced a value no store can hold: {problem}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = FailureRecord(
                step.id, step.type, self.ctx.strip_secrets(str(exc)), type(exc).__name__,
                started_wall, round(time.monotonic() - started, 3), step.fail_task_on_error,
                is_infra=is_infra(exc), plain=is_plain(exc),
            )
            if not isinstance(exc, StepError):
                from agent_env.logs import get_logger

                get_logger("tasks").debug("step raised", step=step.id, exc_info=True)
        seconds = time.monotonic() - started
        self.timings[step.id] = {"step_id": step.id, "started_at_utc": started_wall,
                                 "duration_seconds": round(seconds, 3),
                                 "outcome": "failed" if failure else "completed"}
        self.emit(
            "step_finished", self.ctx, step_id=step.id, step_type=step.type,
            outcome="failed" if failure else "completed", duration_seconds=seconds,
            error=failure.summary if failure else None,
            detail={**where, "fatal": failure.is_fatal} if failure else where,
        )
        return failure


def step_of(step_type: str, raw: Mapping[str, Any], why: str) -> Step:
    """A step of ``step_type`` that another step runs itself (a judge's prompt, a trigger's
    prompt to its executor), built from ``raw``. StepError when no plugin provides the type
    (``why`` says what it was wanted for) or ``raw`` does not fit it."""
    from agent_env.runtime import current

    step_class = current().host.registry("step_type").get(step_type)
    if step_class is None:
        raise StepError(f"{why}: no installed plugin provides the step type '{step_type}'")
    try:
        return structure_step(step_class, raw)
    except ValueError as exc:
        raise StepError(f"{why}: {exc}") from None

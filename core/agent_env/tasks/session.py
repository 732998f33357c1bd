"""A session: several task runs side by side (at most 4 at once), sharing one teardown.

``agent-env run`` and ``task run`` both use it; cancelling the session cancels every run (those
still waiting for a slot are recorded ``cancelled`` too). The session never tears down: its
caller does, through :attr:`Session.teardown`, after the runs end.

Where the runs execute is the selected runner's business (:mod:`agent_env.runners`): with
``local`` (the default) they run right here, sharing the teardown (so ``--keep`` can hold them
up); with any other runner each run is handed to it, and it tears each run down itself.
At most ``max_parallel`` (``[runner] max_concurrency``, default 4) are in flight either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks import records, scores
from agent_env.tasks.artifacts import ArtifactSource
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import TaskObserver, TaskResult, run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.records import InstanceRecord, InstanceStore
from agent_env.tasks.steps import RunChoices
from agent_env.tasks.teardown import Teardown, TeardownReport

if TYPE_CHECKING:
    from agent_env.runners import Runner

MAX_PARALLEL_TASKS = 4


@attrs.frozen
class RunRequest:
    """One task to run, where its artifacts come from, the caller's choices (``--model``,
    ``--agent``) and its metadata (``seed``...)."""

    spec: TaskSpec
    artifacts: ArtifactSource
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    choices: RunChoices = attrs.field(factory=RunChoices)


class Session:
    def __init__(
        self,
        *,
        instances: InstanceStore | None,
        observer: TaskObserver | None = None,
        sandbox_chain: Sequence[str] | None = None,
        max_parallel: int | None = None,
        registry: Mapping[str, type] | None = None,
        runner: Runner | None = None,
    ) -> None:
        """``runner``: the runner runs go to; None picks ``[runner] impl``, and a
        :class:`~agent_env.runners.local.LocalRunner` (or none selected) means run here."""
        self.instances = instances
        self.observer = observer or TaskObserver()
        self.sandbox_chain = list(sandbox_chain) if sandbox_chain else None
        if max_parallel is None:
            from agent_env.runners import max_concurrency

            max_parallel = max_concurrency()
        self.max_parallel = max_parallel
        self.runner = runner
        #: what the runner's own teardowns did (empty when the runs ran here)
        self.runner_reports: list[TeardownReport] = []
        self._remote: Runner | None = None
        self.registry = registry
        self.teardown = Teardown()
        self.contexts: list[TaskContext] = []
        self.cancel_reason: str | None = None
        self._futures: list[asyncio.Future[TaskResult]] = []

    async def run_all(self, requests: Sequence[RunRequest]) -> list[TaskResult]:
        remote = self._remote_runner()
        slots = asyncio.Semaphore(self.max_parallel)
        if remote is not None:
            try:
                return list(await asyncio.gather(*(self._run_remote(remote, r, slots)
                                                   for r in requests)))
            finally:
                await remote.close()
        contexts = [self._context(r) for r in requests]
        self._futures = [asyncio.ensure_future(self._run_one(r, ctx, slots))
                         for r, ctx in zip(requests, contexts, strict=True)]
        # A future cancelled before its first step never enters _run_one's handler, so a run
        # cancelled that early is recorded here (the gather itself being cancelled still raises).
        done = await asyncio.gather(*self._futures, return_exceptions=True)
        results: list[TaskResult] = []
        for request, ctx, outcome in zip(requests, contexts, done, strict=True):
            if isinstance(outcome, asyncio.CancelledError):
                outcome = self._never_started(request.spec, ctx)
            elif isinstance(outcome, BaseException):
                raise outcome
            results.append(outcome)
        return results

    def cancel(self, reason: str) -> None:
        """Cancel every run (``reason`` shows as ``cancelled by <reason>``)."""
        self.cancel_reason = reason
        for ctx in self.contexts:
            ctx.metadata["cancel_reason"] = reason
        for future in self._futures:
            future.cancel()
        if self._remote is not None:
            self._remote.cancel(reason)

    def _remote_runner(self) -> Runner | None:
        """The runner runs go to, or None to run them here (the ``local`` runner)."""
        from agent_env.runners import RunnerContext, open_runner, runner_name
        from agent_env.runners.local import LocalRunner

        if self.runner is None:
            if runner_name() == LocalRunner.name:
                return None
            self.runner = open_runner(RunnerContext(self.instances, self.sandbox_chain,
                                                    self.registry))
        if isinstance(self.runner, LocalRunner):
            return None
        self._remote = self.runner
        if self.cancel_reason is not None:
            self.runner.cancel(self.cancel_reason)
        return self.runner

    async def _run_remote(self, runner: Runner, request: RunRequest,
                          slots: asyncio.Semaphore) -> TaskResult:
        async with slots:
            result, report = await runner.run(request)
        self.runner_reports.append(report)
        self.observer.task_finished(result)
        return result

    def _context(self, request: RunRequest) -> TaskContext:
        ctx = TaskContext(
            task_id=request.spec.id,
            instance_id=records.new_instance_id(request.spec.id),
            artifacts=request.artifacts,
            teardown=self.teardown,
            metadata={**request.metadata, **request.choices.recorded()},
            sandbox_chain=self.sandbox_chain,
            choices=request.choices,
        )
        if self.cancel_reason is not None:
            ctx.metadata["cancel_reason"] = self.cancel_reason
        self.contexts.append(ctx)
        return ctx

    async def _run_one(self, request: RunRequest, ctx: TaskContext,
                       slots: asyncio.Semaphore) -> TaskResult:
        try:
            async with slots:
                if self.cancel_reason is not None:
                    raise asyncio.CancelledError
                return await run_task(request.spec, ctx, registry=self.registry,
                                      observer=self.observer, instances=self.instances)
        except asyncio.CancelledError:
            return self._never_started(request.spec, ctx)

    def _never_started(self, spec: TaskSpec, ctx: TaskContext) -> TaskResult:
        now = records.utc_now()
        record = InstanceRecord(ctx.instance_id, spec.id, spec.version, records.CANCELLED, now,
                                now, scores.CANCELLED, cancel_reason=self.cancel_reason,
                                duration_seconds=0.0, context=ctx.snapshot())
        if self.instances is not None:
            self.instances.save(record)
        return TaskResult(spec, ctx.instance_id, scores.CANCELLED, {}, [], [], 0.0,
                          cancel_reason=self.cancel_reason)

"""A session: several task runs side by side (at most 4 at once), sharing one teardown.

``agent-env run`` and ``task run`` both use it; cancelling the session cancels every run (those
still waiting for a slot are recorded ``cancelled`` too). The session never tears down: its
caller does, through :attr:`Session.teardown`, after the runs end.

Dispatch goes one way: the session hands every request to the selected runner
(:mod:`agent_env.runners`) and the runner runs it. ``local`` (the default) runs it right here,
registering what it brings up in the session's teardown (so ``--keep`` can hold it up); any
other runner tears each run down itself. At most ``max_parallel`` (``[runner]
max_concurrency``, default 4) are in flight either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks import records
from agent_env.tasks.artifacts import ArtifactSource
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import TaskResult, emit_event, never_started
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.records import InstanceStore
from agent_env.tasks.resume import Resume
from agent_env.tasks.steps import RunChoices
from agent_env.tasks.teardown import Teardown, TeardownReport

if TYPE_CHECKING:
    from agent_env.runners import Runner

MAX_PARALLEL_TASKS = 4


@attrs.frozen
class RunRequest:
    """One task to run, where its artifacts come from, the caller's choices (``--model``,
    ``--agent``), its seed and free-form metadata for its record (``run_group_id``...)."""

    spec: TaskSpec
    artifacts: ArtifactSource
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    choices: RunChoices = attrs.field(factory=RunChoices)
    #: ``<name>`` -> value, replaced in every string of every step.
    seed: Mapping[str, Any] | None = None
    #: Continue a saved run from one of its steps (``task run --start-step``).
    resume: Resume | None = None

    def context(self, *, teardown: Teardown | None = None,
                sandbox_chain: Sequence[str] | None = None) -> TaskContext:
        """A fresh context for one run of this request (a new instance id), its choices and
        seed typed and recorded in its metadata, and what it continues taken in."""
        ctx = TaskContext(
            task_id=self.spec.id, instance_id=records.new_instance_id(self.spec.id),
            artifacts=self.artifacts, teardown=teardown,
            metadata={**self.metadata, **self.choices.recorded()},
            sandbox_chain=sandbox_chain, choices=self.choices, seed=self.seed,
        )
        if self.resume is not None:
            ctx.continue_from(self.resume)
        return ctx


class Session:
    def __init__(
        self,
        *,
        instances: InstanceStore | None,
        sandbox_chain: Sequence[str] | None = None,
        max_parallel: int | None = None,
        registry: Mapping[str, type] | None = None,
        runner: Runner | None = None,
    ) -> None:
        """``runner``: the runner runs go to; None opens ``[runner] impl`` with this session's
        teardown."""
        self.instances = instances
        self.sandbox_chain = list(sandbox_chain) if sandbox_chain else None
        if max_parallel is None:
            from agent_env.runners import max_concurrency

            max_parallel = max_concurrency()
        self.max_parallel = max_parallel
        self.runner = runner
        self.registry = registry
        self.teardown = Teardown()
        #: what the runner's own teardowns did (empty when the runs share the session's)
        self.runner_reports: list[TeardownReport] = []
        self.cancel_reason: str | None = None

    async def run_all(self, requests: Sequence[RunRequest]) -> list[TaskResult]:
        from agent_env.runners import RunnerContext, open_runner

        if self.runner is None:
            self.runner = open_runner(RunnerContext(
                self.instances, self.sandbox_chain, self.registry, teardown=self.teardown))
        runner = self.runner
        if self.cancel_reason is not None:
            runner.cancel(self.cancel_reason)
        slots = asyncio.Semaphore(self.max_parallel)
        try:
            return list(await asyncio.gather(*(self._run(runner, r, slots) for r in requests)))
        finally:
            await runner.close()

    def cancel(self, reason: str) -> None:
        """Cancel every run (``reason`` shows as ``cancelled by <reason>``); those waiting for
        a slot are recorded ``cancelled`` without starting."""
        self.cancel_reason = reason
        if self.runner is not None:
            self.runner.cancel(reason)

    async def _run(self, runner: Runner, request: RunRequest,
                   slots: asyncio.Semaphore) -> TaskResult:
        async with slots:
            if self.cancel_reason is not None:
                return self._never_started(request)
            result, report = await runner.run(request)
        self.runner_reports.append(report)
        if getattr(runner, "teardown", None) is not self.teardown:
            _ran_elsewhere(result)  # runs here told their observers themselves
        return result

    def _never_started(self, request: RunRequest) -> TaskResult:
        ctx = request.context()
        ctx.cancel_reason = self.cancel_reason
        return never_started(request.spec, ctx, self.instances)


def _ran_elsewhere(result: TaskResult) -> None:
    """Tell this machine's run-event observers how a run another runner ran ended (its own
    events were emitted where it ran)."""
    emit_event("run_finished", result.instance_id, result.task.id,
               outcome=result.outcome, duration_seconds=result.duration_seconds,
               error=result.first_fatal.summary if result.first_fatal else None,
               detail={"label": result.task.label, "ran_elsewhere": True})

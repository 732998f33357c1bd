"""The ``local`` runner: every run in this process, on this machine's sandboxes (asyncio).

It runs each request itself, through the engine (:func:`agent_env.tasks.engine.run_task`), and
tears each run down as soon as it ends, so a long eval never holds more sandboxes than runs in
flight; given a shared teardown (``RunnerContext.teardown``: ``agent-env run --keep``) it
leaves that to the teardown's owner. How many run at once is the caller's choice
(``--max-concurrency``, ``[runner] max_concurrency``): the runner itself adds no queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from agent_env.runners import RunnerContext
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.records import InstanceStore
    from agent_env.tasks.session import RunRequest
    from agent_env.tasks.teardown import Teardown, TeardownReport


class LocalRunner:
    """Runs each request in this process (the engine)."""

    name: ClassVar[str] = "local"

    def __init__(self, instances: InstanceStore | None, *,
                 sandbox_chain: Sequence[str] | None = None,
                 registry: Mapping[str, type] | None = None,
                 teardown: Teardown | None = None) -> None:
        self.instances = instances
        self.sandbox_chain = sandbox_chain
        self.registry = registry
        self.teardown = teardown
        #: the runs in flight, by context (cancel reaches each)
        self.active: dict[TaskContext, asyncio.Task[object]] = {}
        self.cancel_reason: str | None = None

    @classmethod
    def from_config(cls, *, context: RunnerContext) -> LocalRunner:
        """``local`` takes no ``[runner.config]`` settings."""
        return cls(context.instances, sandbox_chain=context.sandbox_chain,
                   registry=context.registry, teardown=context.teardown)

    async def run(self, request: RunRequest) -> tuple[TaskResult, TeardownReport]:
        from agent_env.tasks.engine import never_started, run_task
        from agent_env.tasks.teardown import TeardownReport

        # no shared teardown: the context makes its own, run down below
        ctx = request.context(teardown=self.teardown, sandbox_chain=self.sandbox_chain)
        if self.cancel_reason is not None:
            ctx.cancel_reason = self.cancel_reason
            return never_started(request.spec, ctx, self.instances), TeardownReport()
        # run here, in the caller's task (not a new one: a SystemExit a step or observer
        # raises must unwind through the caller, whose teardown then runs); cancel() cancels it
        task = asyncio.current_task()
        if task is not None:
            self.active[ctx] = task
        try:
            try:
                result = await run_task(request.spec, ctx, registry=self.registry,
                                        instances=self.instances)
            except asyncio.CancelledError:  # cancelled before its first step
                result = never_started(request.spec, ctx, self.instances)
        finally:
            self.active.pop(ctx, None)
            report = TeardownReport() if self.teardown is not None else \
                await asyncio.shield(ctx.teardown.run())
        return result, report

    def cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        for ctx, task in list(self.active.items()):
            ctx.cancel_reason = reason
            task.cancel()

    async def close(self) -> None:
        """Nothing to release: every run tore itself down (or its teardown's owner will)."""

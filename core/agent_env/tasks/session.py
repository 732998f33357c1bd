"""A session: several task runs side by side (at most 4 at once), sharing one teardown.

``agent-env run`` and ``task run`` both use it; cancelling the session cancels every run (those
still waiting for a slot are recorded ``cancelled`` too). The session never tears down: its
caller does, through :attr:`Session.teardown`, after the runs end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agent_env.tasks import records, scores
from agent_env.tasks.artifacts import ArtifactSource
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import TaskObserver, TaskResult, run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.records import InstanceRecord, InstanceStore
from agent_env.tasks.teardown import Teardown

MAX_PARALLEL_TASKS = 4


@attrs.frozen
class RunRequest:
    """One task to run, where its artifacts come from and its metadata (``seed``...)."""

    spec: TaskSpec
    artifacts: ArtifactSource
    metadata: Mapping[str, Any] = attrs.field(factory=dict)


class Session:
    def __init__(
        self,
        *,
        instances: InstanceStore | None,
        observer: TaskObserver | None = None,
        sandbox_chain: Sequence[str] | None = None,
        max_parallel: int = MAX_PARALLEL_TASKS,
        registry: Mapping[str, type] | None = None,
    ) -> None:
        self.instances = instances
        self.observer = observer or TaskObserver()
        self.sandbox_chain = list(sandbox_chain) if sandbox_chain else None
        self.max_parallel = max_parallel
        self.registry = registry
        self.teardown = Teardown()
        self.contexts: list[TaskContext] = []
        self.cancel_reason: str | None = None
        self._futures: list[asyncio.Future[TaskResult]] = []

    async def run_all(self, requests: Sequence[RunRequest]) -> list[TaskResult]:
        slots = asyncio.Semaphore(self.max_parallel)
        self._futures = [asyncio.ensure_future(self._run_one(r, slots)) for r in requests]
        if self.cancel_reason is not None:
            self.cancel(self.cancel_reason)
        return list(await asyncio.gather(*self._futures))

    def cancel(self, reason: str) -> None:
        """Cancel every run (``reason`` shows as ``cancelled by <reason>``)."""
        self.cancel_reason = reason
        for ctx in self.contexts:
            ctx.metadata["cancel_reason"] = reason
        for future in self._futures:
            future.cancel()

    async def _run_one(self, request: RunRequest, slots: asyncio.Semaphore) -> TaskResult:
        ctx = TaskContext(
            task_id=request.spec.id,
            instance_id=records.new_instance_id(request.spec.id),
            artifacts=request.artifacts,
            teardown=self.teardown,
            metadata=dict(request.metadata),
            sandbox_chain=self.sandbox_chain,
        )
        self.contexts.append(ctx)
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

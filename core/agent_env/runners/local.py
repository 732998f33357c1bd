"""The ``local`` runner: every run in this process, on this machine's sandboxes (asyncio).

Each request runs in its own :class:`~agent_env.tasks.session.Session` and is torn down as soon
as it ends, so a long eval never holds more sandboxes than runs in flight. How many run at once
is the caller's choice (``--max-concurrency``, ``[runner] max_concurrency``): the runner itself
adds no queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from agent_env.runners import RunnerContext
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.records import InstanceStore
    from agent_env.tasks.session import RunRequest, Session
    from agent_env.tasks.teardown import TeardownReport


class LocalRunner:
    """Runs each request in this process (the engine), one session per run."""

    name: ClassVar[str] = "local"

    def __init__(self, instances: InstanceStore | None, *,
                 sandbox_chain: Sequence[str] | None = None,
                 registry: Mapping[str, type] | None = None) -> None:
        self.instances = instances
        self.sandbox_chain = sandbox_chain
        self.registry = registry
        self.active: set[Session] = set()
        self.cancel_reason: str | None = None

    @classmethod
    def from_config(cls, *, context: RunnerContext) -> LocalRunner:
        """``local`` takes no ``[runner.config]`` settings."""
        return cls(context.instances, sandbox_chain=context.sandbox_chain,
                   registry=context.registry)

    async def run(self, request: RunRequest) -> tuple[TaskResult, TeardownReport]:
        from agent_env.tasks.engine import TaskObserver
        from agent_env.tasks.session import Session

        session = Session(instances=self.instances, observer=TaskObserver(),
                          sandbox_chain=self.sandbox_chain, max_parallel=1,
                          registry=self.registry, runner=self)
        if self.cancel_reason is not None:
            session.cancel(self.cancel_reason)
        self.active.add(session)
        try:
            (result,) = await session.run_all([request])
        finally:
            self.active.discard(session)
            report = await session.teardown.run()
        return result, report

    def cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        for session in list(self.active):
            session.cancel(reason)

    async def close(self) -> None:
        """Nothing to release: every run tore itself down."""

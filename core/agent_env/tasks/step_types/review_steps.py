"""``review``: the run waits for a person to approve or reject before it goes on.

The step records an awaiting review (:mod:`agent_env.reviews`) with the latest agent reply for
the person to read, then polls until ``agent-env task review --id <run> --approve`` (or
``--reject``) decides it, or ``timeout_seconds`` pass (the step fails, naming the review). A
rejection fails the step with the reviewer's comment, so the steps after it do not run. For
runs nobody watches, ``--auto-review approve`` (or ``reject``) on ``run`` / ``task run``
decides every review at once, recorded as decided by ``auto-review``. Nothing is left
awaiting: a review nobody decided ends ``expired`` at the timeout and ``cancelled`` when the
run stops (Ctrl-C).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.steps import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext

DEFAULT_TIMEOUT_SECONDS = 10800.0
DEFAULT_POLL_SECONDS = 5.0
UPSTREAM_CHARS = 4000


@attrs.define(kw_only=True)
class Review(Step):
    type = "review"

    #: What the reviewer is asked (shown by ``task review --list``).
    label: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    poll_interval_seconds: float = DEFAULT_POLL_SECONDS

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        if self.poll_interval_seconds <= 0:
            problems.append("poll_interval_seconds must be positive")
        return problems

    def _upstream(self, ctx: TaskContext) -> str | None:
        """The latest agent reply of the run so far (what the reviewer judges), trimmed."""
        for output in reversed(list(ctx.outputs.values())):
            if isinstance(output, dict) and isinstance(output.get("response"), str):
                return str(output["response"])[:UPSTREAM_CHARS]
        return None

    async def run(self, ctx: TaskContext) -> None:
        from agent_env.reviews import (
            APPROVED,
            AWAITING,
            CANCELLED,
            EXPIRED,
            REJECTED,
            reviews,
        )

        store = reviews()
        await asyncio.to_thread(store.open, ctx.instance_id, self.id, self.label,
                                self._upstream(ctx))
        auto = ctx.choices.auto_review
        if auto:
            await asyncio.to_thread(store.decide, ctx.instance_id, self.id,
                                    APPROVED if auto == "approve" else REJECTED,
                                    "auto-review", None)
        else:
            ctx.note(f"review '{self.id}' waits: agent-env task review --id {ctx.instance_id} "
                     f"--approve (or --reject)")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_seconds
        try:
            while True:
                found: Any = await asyncio.to_thread(store.get, f"{ctx.instance_id}:{self.id}")
                if found is not None and found.state != AWAITING:
                    break
                if loop.time() >= deadline:
                    _close(store, ctx.instance_id, self.id, EXPIRED)
                    raise StepError(f"review '{self.id}' was not decided within "
                                    f"{self.timeout_seconds:g}s")
                await asyncio.sleep(min(self.poll_interval_seconds,
                                        max(0.0, deadline - loop.time())))
        except asyncio.CancelledError:
            _close(store, ctx.instance_id, self.id, CANCELLED)
            raise
        ctx.outputs[self.id] = {"decision": found.state, "decided_by": found.decided_by,
                                "comment": found.comment}
        if found.state == REJECTED:
            said = f": {found.comment}" if found.comment else ""
            raise StepError(f"review '{self.id}' was rejected by {found.decided_by}{said}")


def _close(store: Any, instance_id: str, step_id: str, state: str) -> None:
    """End a review nobody decided (its run no longer waits); one already decided stays."""
    try:
        store.decide(instance_id, step_id, state, "agent-env", None)
    except ValueError:
        pass

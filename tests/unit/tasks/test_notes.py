"""``ctx.note``: a step's progress line reaches the run's observers (a ``note`` run event),
secrets masked."""

from __future__ import annotations

from typing import Any

import attrs

from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.steps import Step


@attrs.define(kw_only=True)
class Chatty(Step):
    type = "chatty"

    async def run(self, ctx: TaskContext) -> None:
        ctx.register_secret("tok-secret-123")
        ctx.note("image built with tok-secret-123")


class Recorder:
    """Stands in for ``agent_env_run_event``: keeps the ``note`` events the engine emits."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []

    def __call__(self, kind: str, ctx: TaskContext, **fields: Any) -> None:
        if kind == "note":
            detail = fields["detail"]
            self.notes.append((detail["label"], detail["text"]))


async def test_notes_reach_the_observer_with_secrets_masked() -> None:
    recorder = Recorder()
    ctx = TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts())
    task = TaskSpec("t", "tasks/t.json", [{"type": "chatty", "id": "c"}])
    await run_task(task, ctx, registry={"chatty": Chatty}, emit=recorder)
    assert recorder.notes == [("tasks/t.json", "image built with ****")]


def test_a_note_with_nobody_listening_is_dropped() -> None:
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    ctx.note("nobody hears this")  # must not raise

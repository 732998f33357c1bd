"""Run events delivered to observers through ``agent_env_run_event``.

``detail`` carries what a display needs: ``label`` (the task as people name it) on every event,
``position``/``total`` on step events, ``fatal`` on a failed step, ``text`` on a ``note`` (a
progress line a step sent with ``ctx.note``, secrets masked).

A group of runs (an eval, a batch) adds ``slot_started`` (``instance_id`` empty: the run has
none yet) and ``slot_finished`` for each of its slots, with ``detail`` ``described`` (the
outcome with its scores), ``attempts`` (runs so far), ``retrying`` (an infrastructure error run
again) and ``reused`` (a resumed group's finished run)."""

from __future__ import annotations

from typing import Any

import attrs

EVENT_KINDS = ("run_started", "run_finished", "step_started", "step_finished", "note",
               "slot_started", "slot_finished")


@attrs.frozen
class RunEvent:
    """One thing that happened in a run; ``step_*`` fields are None for run-level events."""

    kind: str = attrs.field(validator=attrs.validators.in_(EVENT_KINDS))
    instance_id: str
    task_id: str
    timestamp_utc: str
    step_id: str | None = None
    step_type: str | None = None
    outcome: str | None = None
    error: str | None = None
    duration_seconds: float | None = None
    detail: dict[str, Any] = attrs.field(factory=dict)

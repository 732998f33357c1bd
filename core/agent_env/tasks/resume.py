"""Continuing a run from a saved context: ``task run --start-step N --context-json FILE``.

Why: a task's last steps are where its author iterates (a verifier's criteria, a judge's
prompt), and running the agent again for each try costs money and gives a different answer.
A continued run takes the steps before ``N`` as done, with the outputs and verifications the
saved run recorded (the agent's replies among them), and runs ``N`` onward as a new instance.

What it does not take: the saved run's deployments. Its envs, agents and sandboxes were
reached with tokens that are never written to a record, so a continued run cannot re-attach
to them; a remaining step that uses one fails naming the step to start from instead. The
saved context is an instance record (what ``task run --output-dir`` writes and ``task
get-instance`` prints) or the ``context`` object inside one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_env.errors import UserError
from agent_env.tasks.scores import ScoreRow, Verification

_ROW_KEYS = ("criterion_index", "score", "result", "justification", "skipped")


@attrs.frozen
class Resume:
    """Where a continued run starts and what it takes from the run it continues."""

    #: 0-based index of the first step that runs.
    start_step: int
    #: The file the context came from, and the instance it recorded (for the record).
    source: str
    source_instance: str | None
    #: The skipped steps' outputs and verifications, as the saved run recorded them.
    outputs: dict[str, Any]
    verifications: dict[str, Verification]
    #: What the saved run had deployed ("envs", "agents", "sandboxes" -> names), not
    #: re-attached.
    left_behind: dict[str, tuple[str, ...]]
    skipped: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        """What the continued run's record keeps (metadata ``resumed_from``)."""
        return {"source": self.source, "instance_id": self.source_instance,
                "start_step": self.start_step, "skipped_steps": list(self.skipped)}


def read_resume(path: Path, task_id: str, step_ids: Sequence[str], start_step: int) -> Resume:
    """The resume ``path`` and ``start_step`` describe for a task of ``step_ids``; a
    :class:`UserError` naming the fix when they do not fit."""
    if not 0 <= start_step < len(step_ids):
        raise UserError(f"--start-step {start_step} is out of range: the task has "
                        f"{len(step_ids)} steps (0 to {len(step_ids) - 1})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"--context-json: cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"--context-json: {path} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"--context-json: {path} holds no object (give an instance record, "
                        "as task run --output-dir writes it)")
    record = data if "context" in data else None
    context = data.get("context") if record is not None else data
    if not isinstance(context, dict) or not isinstance(context.get("outputs"), dict):
        why = (context or {}).get("not_stored") if isinstance(context, dict) else None
        raise UserError(f"--context-json: {path} has no saved context with step outputs"
                        + (f" ({why})" if why else " (give an instance record, as task run "
                           "--output-dir writes it or task get-instance prints it)"))
    if record is not None and record.get("task_id") not in (None, task_id):
        raise UserError(f"--context-json: {path} is a run of task '{record.get('task_id')}', "
                        f"not '{task_id}'")
    skipped = tuple(step_ids[:start_step])
    if record is not None and isinstance(record.get("completed_steps"), list):
        missing = [s for s in skipped if s not in record["completed_steps"]]
        if missing:
            raise UserError(f"--start-step {start_step}: step '{missing[0]}' did not complete "
                            f"in the saved run ({path}); start at or before it")
    outputs = {k: v for k, v in context["outputs"].items() if k in skipped}
    saved = ((context.get("metadata") or {}).get("verifications") or {})
    verifications = {}
    for key, value in saved.items() if isinstance(saved, dict) else ():
        if isinstance(value, dict) and value.get("step_id") in skipped:
            verifications[key] = _verification(key, value, path)
    left = {kind: tuple(sorted(context.get(kind) or {})) for kind in
            ("envs", "agents", "sandboxes")}
    instance = record.get("instance_id") if record is not None else None
    return Resume(start_step, str(path), str(instance) if instance else None, outputs,
                  verifications, left, skipped)


def _verification(key: str, value: dict[str, Any], path: Path) -> Verification:
    try:
        rows = []
        for row in value.get("results") or []:
            criterion = {k: v for k, v in row.items() if k not in _ROW_KEYS}
            rows.append(ScoreRow(int(row["criterion_index"]), float(row["score"]),
                                 bool(row["result"]), str(row.get("justification") or ""),
                                 bool(row.get("skipped")), float(criterion.get("weight", 1.0)),
                                 criterion))
        return Verification(key, str(value["step_id"]), float(value["score"]), tuple(rows))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"--context-json: {path}: verification '{key}' is malformed "
                        f"({type(exc).__name__}: {exc})") from None


def left_behind_problem(resume: Resume | None, kind: str, name: str) -> str | None:
    """Why ``name`` (an env, agent or sandbox a step asked for) is not here, when the run this
    one continues had it up."""
    if resume is None or name not in resume.left_behind.get(kind, ()):
        return None
    what = {"envs": "env", "agents": "agent", "sandboxes": "sandbox"}[kind]
    return (f"{what} '{name}' was deployed by a step before --start-step {resume.start_step} "
            "(in the run this one continues), and a continued run does not re-attach to "
            "another run's deployments (their tokens are never written down); start at or "
            "before the step that deploys it")

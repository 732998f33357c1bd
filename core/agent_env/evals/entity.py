"""Evals as versioned entities: a list of ``{task_id, task_version | null}``.

An eval file (``eval create`` / ``eval add-tasks``) is JSON or TOML: a list of entries, or an
object with ``tasks`` (and optional ``type``). An entry is a stored task id, or
``{"task_id": ..., "task_version": N | null}``; ``null`` means the latest version when the eval
runs. Every task named must be stored (and that version, when one is given) before anything is
written; an unchanged eval reuses its version, as the ledger does for every entity.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_env.errors import UserError
from agent_env.stores.base import MAX_VERSION

KIND = "evals"


@attrs.frozen
class EvalTask:
    task_id: str
    task_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "task_version": self.task_version}

    @property
    def label(self) -> str:
        return self.task_id + (f" v{self.task_version}" if self.task_version else "")


@attrs.frozen
class EvalFile:
    tasks: tuple[EvalTask, ...]
    type: str | None = None


def _entry(where: str, position: int, item: Any) -> EvalTask:
    if isinstance(item, str) and item:
        return EvalTask(item)
    if isinstance(item, dict):
        unknown = sorted(set(item) - {"task_id", "task_version"})
        task_id, version = item.get("task_id"), item.get("task_version")
        if unknown:
            raise UserError(f"{where}: task {position}: unknown key {unknown[0]!r} "
                            "(an entry has task_id and task_version)")
        if not isinstance(task_id, str) or not task_id:
            raise UserError(f"{where}: task {position}: task_id must be a non-empty string")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or not 1 <= version <= MAX_VERSION):
            raise UserError(f"{where}: task {position}: task_version must be a version number "
                            f"(1, 2, ...) or null, not {version!r}")
        return EvalTask(task_id, version)
    raise UserError(f"{where}: task {position}: expected a task id or "
                    f"{{\"task_id\": ..., \"task_version\": ...}}, not {item!r}")


def parse_eval(where: str, data: Any) -> EvalFile:
    """An eval file's content, checked: entries, no duplicates, at least one task."""
    kind = None
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"tasks", "type", "id", "name"})
        if unknown:
            raise UserError(f"{where}: unknown key {unknown[0]!r} (an eval has tasks and type)")
        kind = data.get("type")
        if kind is not None and not isinstance(kind, str):
            raise UserError(f"{where}: type must be a string")
        data = data.get("tasks")
    if not isinstance(data, list):
        raise UserError(f"{where}: an eval file is a list of tasks, or an object with tasks = "
                        "[...]")
    tasks = [_entry(where, i, item) for i, item in enumerate(data, start=1)]
    seen: set[EvalTask] = set()
    for task in tasks:
        if task in seen:
            raise UserError(f"{where}: task {task.label} is listed twice")
        seen.add(task)
    if not tasks:
        raise UserError(f"{where}: the eval lists no tasks")
    return EvalFile(tuple(tasks), kind)


def read_eval_file(path: Path) -> EvalFile:
    """Read an eval file (``.toml`` as TOML, anything else as strict JSON)."""
    from agent_env.bundles.jsonfile import StrictJSONError, loads_strict

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); save "
                        "the file as UTF-8") from None
    if path.suffix == ".toml":
        from tomlkit.exceptions import ParseError

        from agent_env.config import loads_toml

        try:
            data: Any = loads_toml(text)
        except ParseError as exc:
            raise UserError(f"{path}:{exc.line}: invalid TOML ({exc})") from None
    else:
        try:
            data = loads_strict(text)
        except StrictJSONError as exc:
            raise UserError(f"{exc.where(str(path))}: {exc.message}") from None
    return parse_eval(str(path), data)


def check_stored(versioned: Any, tasks: Sequence[EvalTask]) -> None:
    """Every task (and version) an eval names is stored; else one error naming them all."""
    missing = [t.label for t in tasks if versioned.get("tasks", t.task_id, t.task_version) is None]
    if missing:
        noun = "task is" if len(missing) == 1 else "tasks are"
        raise UserError(f"{len(missing)} {noun} not stored: {', '.join(missing)} (agent-env task "
                        "create FILE --id ID stores one); nothing was written")


def stored_tasks(record: Any) -> list[EvalTask]:
    """The tasks of a stored eval version (the ledger writes the same shape for bundles)."""
    return [EvalTask(str(t["task_id"]), t.get("task_version")) for t in record.body["tasks"]]


def _reason(old: Sequence[EvalTask] | None, new: Sequence[EvalTask]) -> str:
    if old is None:
        return "new"
    added = [t.label for t in new if t not in old]
    removed = [t.label for t in old if t not in new]
    parts = [f"tasks {verb}: {', '.join(names)}" for verb, names in
             (("added", added), ("removed", removed)) if names]
    return "; ".join(parts) or "settings changed"


def put_eval(versioned: Any, eval_id: str, tasks: Sequence[EvalTask],
             kind: str | None = None) -> tuple[Any, bool, str]:
    """Write the eval if its content changed: ``(record, created, reason)``."""
    check_stored(versioned, tasks)
    latest = versioned.get(KIND, eval_id)
    reason = _reason(stored_tasks(latest) if latest else None, tasks)
    body = {"name": eval_id, "type": kind, "tasks": [t.to_json() for t in tasks]}
    record, created = versioned.put_if_changed(KIND, eval_id, body, reason=reason)
    return record, created, reason


def get_eval(versioned: Any, eval_id: str, version: int | None) -> Any:
    record = versioned.get(KIND, eval_id, version)
    if record is None:
        at = f" version {version}" if version else ""
        raise UserError(f"no eval '{eval_id}'{at} is stored (agent-env eval create FILE --id "
                        f"{eval_id} stores one)")
    return record

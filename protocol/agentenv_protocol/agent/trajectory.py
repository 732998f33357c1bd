"""Trajectories (trajectory/v1, agent side): what each turn appended, readable whole or by cursor.

Kept in memory per context, least recently used first out, at most ``max_contexts`` contexts; a
context with a turn still pending or running is never evicted, so a live reader never loses the
turn it is following. Cursors are event offsets: ``after`` is how many events the reader has,
``next`` is the ``after`` of the following page.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import attrs

MAX_CONTEXTS = 1024
MAX_LIMIT = 1000
PAGE_BYTES = 4 * 1024 * 1024

# task state -> trajectory state
_STATES = {
    "submitted": "pending",
    "working": "running",
    "completed": "completed",
    "input-required": "completed",
    "failed": "failed",
    "rejected": "failed",
    "canceled": "canceled",
}


class TrajectoryNotFound(LookupError):
    """The task or context is unknown here, or was evicted."""


class CursorError(ValueError):
    """A cursor read whose ``after`` lies past the end of the events."""


@attrs.define
class _TaskLog:
    context_id: str
    state: str = "pending"
    events: list[Any] = attrs.field(factory=list)


@attrs.define
class _ContextLog:
    format: str | None = None
    events: list[Any] = attrs.field(factory=list)
    tasks: dict[str, _TaskLog] = attrs.field(factory=dict)
    last_task: str | None = None

    def running(self) -> bool:
        return any(t.state in ("pending", "running") for t in self.tasks.values())


@attrs.define
class Page:
    """One cursor read, in the wire's field names."""

    context_id: str
    task_id: str | None
    state: str
    format: str | None
    events: list[Any]
    next: int
    has_more: bool


class TrajectoryStore:
    """All contexts' trajectories; one per agent server."""

    def __init__(self, max_contexts: int = MAX_CONTEXTS) -> None:
        self.max_contexts = max_contexts
        self._contexts: OrderedDict[str, _ContextLog] = OrderedDict()
        self._task_context: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._contexts)

    def open_task(self, context_id: str, task_id: str) -> TrajectoryWriter:
        """Register a turn (state pending) and give the writer its run appends through."""
        ctx = self._contexts.get(context_id)
        if ctx is None:
            ctx = self._contexts[context_id] = _ContextLog()
        self._contexts.move_to_end(context_id)
        if task_id not in ctx.tasks:
            ctx.tasks[task_id] = _TaskLog(context_id)
        ctx.last_task = task_id
        self._task_context[task_id] = context_id
        self._evict()
        return TrajectoryWriter(self, context_id, task_id)

    def set_state(self, task_id: str, task_state: str) -> None:
        """Follow the task's state (the cursor answer's ``state``); unknown ids are ignored."""
        log = self._task(task_id)
        if log is not None:
            log.state = _STATES.get(task_state, log.state)
            if log.state not in ("pending", "running"):
                self._evict()

    def _evict(self) -> None:
        excess = len(self._contexts) - self.max_contexts
        if excess <= 0:
            return
        for cid in list(self._contexts):
            if excess <= 0:
                break
            ctx = self._contexts[cid]
            if ctx.running():
                continue
            del self._contexts[cid]
            for tid in ctx.tasks:
                self._task_context.pop(tid, None)
            excess -= 1

    def export_context(self, context_id: str) -> dict[str, Any]:
        """A context's whole trajectory, ``{format, events}`` (snapshot/v1's saved state)."""
        _, ctx, _ = self._lookup(None, context_id)
        return {"format": ctx.format, "events": list(ctx.events)}

    def history(self, context_id: str) -> list[Any]:
        """The events a context holds so far (a copy; empty for a context never seen): what
        an agent rebuilds its memory from, whether its own earlier turns or a loaded
        snapshot's."""
        ctx = self._contexts.get(context_id)
        return list(ctx.events) if ctx is not None else []

    def event_counts(self) -> dict[str, int]:
        """How many events each context holds (where a changelog starts logging)."""
        return {cid: len(ctx.events) for cid, ctx in self._contexts.items()}

    def import_context(self, context_id: str, fmt: str | None, events: list[Any]) -> None:
        """Start ``context_id`` over from saved events (snapshot/v1's load); later turns
        append after them. A context with a turn still running is refused (ValueError)."""
        old = self._contexts.get(context_id)
        if old is not None and old.running():
            raise ValueError(f"context {context_id!r} has a turn running")
        if old is not None:
            for tid in old.tasks:
                self._task_context.pop(tid, None)
        self._contexts[context_id] = _ContextLog(format=fmt, events=list(events))
        self._contexts.move_to_end(context_id)
        self._evict()

    def _task(self, task_id: str) -> _TaskLog | None:
        cid = self._task_context.get(task_id)
        ctx = self._contexts.get(cid) if cid is not None else None
        return ctx.tasks.get(task_id) if ctx is not None else None

    def _append(self, context_id: str, task_id: str, event: Any) -> None:
        ctx = self._contexts.get(context_id)
        if ctx is None or task_id not in ctx.tasks:
            return  # evicted after the turn ended: a late append has nowhere to go
        ctx.events.append(event)
        ctx.tasks[task_id].events.append(event)

    def _set_format(self, context_id: str, fmt: str) -> None:
        ctx = self._contexts.get(context_id)
        if ctx is not None:
            ctx.format = fmt

    def _lookup(self, task_id: str | None, context_id: str | None) -> tuple[
        str, _ContextLog, _TaskLog | None
    ]:
        if task_id is not None:
            cid = self._task_context.get(task_id)
            if cid is None or cid not in self._contexts:
                raise TrajectoryNotFound(f"no trajectory for task {task_id!r}")
            ctx = self._contexts[cid]
            self._contexts.move_to_end(cid)
            return cid, ctx, ctx.tasks[task_id]
        assert context_id is not None
        ctx_or_none = self._contexts.get(context_id)
        if ctx_or_none is None:
            raise TrajectoryNotFound(f"no trajectory for context {context_id!r}")
        self._contexts.move_to_end(context_id)
        return context_id, ctx_or_none, None

    def whole(self, *, task_id: str | None = None, context_id: str | None = None) -> list[Any]:
        """The events of one task (or of every turn in a context), as a JSON array."""
        _, ctx, task = self._lookup(task_id, context_id)
        return list(task.events if task is not None else ctx.events)

    def page(self, *, after: int, limit: int = MAX_LIMIT, task_id: str | None = None,
             context_id: str | None = None, page_bytes: int = PAGE_BYTES) -> Page:
        """Events ``after``..``after+limit`` (fewer past ``page_bytes``, never none if any)."""
        cid, ctx, task = self._lookup(task_id, context_id)
        events = task.events if task is not None else ctx.events
        if after > len(events):
            raise CursorError(f"after={after} is past the end ({len(events)} events)")
        out: list[Any] = []
        size = 0
        for event in events[after:after + limit]:
            size += len(json.dumps(event, default=str))
            if out and size > page_bytes:
                break
            out.append(event)
        nxt = after + len(out)
        if task is not None:
            state, tid = task.state, task_id
        else:
            last = ctx.tasks.get(ctx.last_task) if ctx.last_task else None
            state, tid = (last.state if last else "pending"), ctx.last_task
        return Page(cid, tid, state, ctx.format, out, nxt, nxt < len(events))


class TrajectoryWriter:
    """``request.trajectory``: the run appends its events (any JSON value) as it goes."""

    def __init__(self, store: TrajectoryStore, context_id: str, task_id: str) -> None:
        self._store = store
        self.context_id = context_id
        self.task_id = task_id

    def set_format(self, fmt: str) -> None:
        """Name the event format (e.g. ``claude-code-stream-json/1``); readers get it back."""
        self._store._set_format(self.context_id, fmt)

    def append(self, event: Any) -> None:
        self._store._append(self.context_id, self.task_id, event)

    def extend(self, events: list[Any]) -> None:
        for event in events:
            self.append(event)

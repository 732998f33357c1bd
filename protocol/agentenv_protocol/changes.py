"""changes/v1: an env's own log of what changed in its state, read page by page.

Why: a trajectory says what the agent asked for; the changelog says what the env did about it
(a row written, a file moved), in the env's words, so a grader or a trainer can tell calls that
changed state from calls that only looked. An env opts in with
``@environment_card(changelog=True)`` and calls ``self.record_change(kind, **data)`` where its
state changes. Its server then:

- serves ``GET /changes?after_id=N&limit=M`` (``after_id`` 0 by default, ``limit`` 1..10000,
  1000 by default) answering ``{changes: [...], has_more}``, oldest first; a bad value is a 400
  ``invalid_params``, and a cursor older than the changes kept (``RETAINED``) a 410
  ``changes_evicted``, so a reader knows it missed some;
- stamps each ``tools/call`` result's ``_meta`` with ``agentenv.io/changelog``:
  ``{"before": id, "after": id}``, the log's last id before and after the call (with calls
  running concurrently the range may hold another call's changes too). The gateway copies them
  onto the call's trajectory events as ``changelog_id_before`` and ``changelog_id``;
- empties the log on ``data/reset`` while ids keep counting, so a cursor stays valid and a
  reused env's next episode reads only its own changes.

A change is ``{id, kind, timestamp_utc, data}``, plus ``tool`` and ``call_id`` when it was
recorded while a tool ran.
"""

from __future__ import annotations

import collections
import contextvars
import datetime as dt
from typing import Any

import attrs

from .errors import AgentEnvError
from .schema import to_jsonable

CHANGES_URI = "urn:agentenv:changes/v1"
CHANGES_PATH = "/changes"
#: The ``_meta`` key of a tool result carrying the log's ids around the call.
CHANGELOG_META_KEY = "agentenv.io/changelog"
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10000
#: Changes kept in memory; older ones are dropped (a cursor before them gets 410).
RETAINED = 100_000

#: The tool call running in this task (set by the server around a tool), for ``tool``/``call_id``.
current_call: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "agentenv_current_call", default=None)


@attrs.define(frozen=True)
class Change:
    id: int
    kind: str
    timestamp_utc: str
    data: dict[str, Any]
    tool: str | None = None
    call_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind,
                               "timestamp_utc": self.timestamp_utc, "data": self.data}
        if self.tool is not None:
            out["tool"] = self.tool
            out["call_id"] = self.call_id
        return out


class Changelog:
    """An env's changes, ids counting from 1 and never reused (see the module docstring)."""

    def __init__(self, retained: int = RETAINED) -> None:
        self.last_id = 0
        self._changes: collections.deque[Change] = collections.deque(maxlen=retained)
        #: Every id up to this one was dropped (cleared by a reset, or evicted): a cursor
        #: before it after eviction has missed changes.
        self._evicted_through = 0

    def record(self, kind: str, data: dict[str, Any]) -> Change:
        if not isinstance(kind, str) or not kind:
            raise ValueError("a change needs a kind (a non-empty string)")
        call = current_call.get()
        data = to_jsonable(data)  # read back as JSON: a datetime or a set is turned now
        self.last_id += 1
        change = Change(self.last_id, kind, dt.datetime.now(dt.UTC).isoformat(), data,
                        tool=call[0] if call else None, call_id=call[1] if call else None)
        if len(self._changes) == self._changes.maxlen:
            self._evicted_through = self._changes[0].id
        self._changes.append(change)
        return change

    def clear(self) -> None:
        """Drop every change (a reset); ids keep counting."""
        self._changes.clear()

    def page(self, after_id: int, limit: int) -> tuple[list[Change], bool]:
        if after_id < self._evicted_through:
            raise AgentEnvError(
                "changes_evicted",
                f"changes after id {after_id} are no longer kept (only the last "
                f"{self._changes.maxlen}); read from after_id={self._evicted_through}",
                status=410)
        if not self._changes or after_id >= self.last_id:
            return [], False
        start = max(0, after_id - self._changes[0].id + 1)
        picked = [self._changes[i]
                  for i in range(start, min(start + limit, len(self._changes)))]
        return picked, start + limit < len(self._changes)


def read_query(after_id: str | None, limit: str | None) -> tuple[int, int]:
    """``after_id`` and ``limit`` from a query string; AgentEnvError (400) naming a bad one."""

    def integer(name: str, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise AgentEnvError("invalid_params",
                                f"{name} must be an integer, got {text[:40]!r}") from None

    after = 0 if after_id in (None, "") else integer("after_id", after_id)
    size = DEFAULT_LIMIT if limit in (None, "") else integer("limit", limit)
    if after < 0:
        raise AgentEnvError("invalid_params", f"after_id must be >= 0, got {after}")
    if not 1 <= size <= MAX_LIMIT:
        raise AgentEnvError("invalid_params",
                            f"limit must be between 1 and {MAX_LIMIT}, got {size}")
    return after, size


def card_entry() -> dict[str, Any]:
    """The extension as the card lists it."""
    return {
        "uri": CHANGES_URI,
        "description": "What changed in the env's state, oldest first, page by page.",
        "params": {
            "endpoint": CHANGES_PATH,
            "methods": {"list": {
                "method": "GET", "endpoint": CHANGES_PATH,
                "request": {"type": "object", "properties": {
                    "after_id": {"type": "integer", "minimum": 0, "default": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                              "default": DEFAULT_LIMIT}}},
            }},
        },
        "required": False,
    }

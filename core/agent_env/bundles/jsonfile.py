"""Strict JSON for task files: duplicate keys, ``NaN`` and ``Infinity`` are refused.

Python's ``json`` accepts all three silently (the last duplicate wins), which hides mistakes in
hand-written task files; the reference refuses them, and so do we, naming the file and line.
"""

from __future__ import annotations

import json
import re
from typing import Any


class StrictJSONError(ValueError):
    """Malformed or non-strict JSON; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def where(self, label: str) -> str:
        return f"{label}:{self.line}" if self.line else label


def _line_of(text: str, pattern: str) -> int | None:
    match = re.search(pattern, text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def loads_strict(text: str) -> Any:
    """Parse ``text``; raises :class:`StrictJSONError` with the line of the problem."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise StrictJSONError(f"duplicate key \"{key}\" in one object",
                                      _duplicate_line(text, key))
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise StrictJSONError(f"{name} is not valid JSON (use a number or null)",
                              _line_of(text, rf"(?<![\w\"]){re.escape(name)}(?![\w\"])"))

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) \
            from None


def _duplicate_line(text: str, key: str) -> int | None:
    """The line of the second ``"key":`` (a best guess: JSON parsers report no positions)."""
    matches = list(re.finditer(rf"\"{re.escape(key)}\"\s*:", text))
    if len(matches) < 2:
        return None
    return text.count("\n", 0, matches[1].start()) + 1

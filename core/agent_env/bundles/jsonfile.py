"""Strict JSON for task files: duplicate keys, ``NaN`` and ``Infinity`` are refused.

Python's ``json`` accepts all three silently (the last duplicate wins), which hides mistakes in
hand-written task files; the reference refuses them, and so do we, naming the file and line.
So are values no store could keep (``1e400``, which parses as infinity; an integer of more than
``MAX_INT_DIGITS`` digits; a lone surrogate escape such as ``"\\ud800"``), nesting deeper than
``MAX_DEPTH``, and text that is not UTF-8 (a byte-order mark is allowed): each is one
:class:`StrictJSONError`, raised before anything is written.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

#: Deeper JSON than this is refused (a task file nests a few levels; Python's parser recurses).
MAX_DEPTH = 100
#: Longer integers are refused (the same bound the run records use).
MAX_INT_DIGITS = 4000
#: Larger files are refused before they are read (a task file is a few KB).
MAX_FILE_BYTES = 16 * 1024 * 1024


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

    def number(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise StrictJSONError(f"{literal} is too large for a number (no store can keep it)",
                                  _line_of(text, re.escape(literal)))
        return value

    def integer(literal: str) -> int:
        if len(literal.lstrip("-")) > MAX_INT_DIGITS:
            raise StrictJSONError(f"an integer of {len(literal.lstrip('-'))} digits is too long "
                                  f"(at most {MAX_INT_DIGITS})",
                                  _line_of(text, rf"-?\d{{{MAX_INT_DIGITS + 1}}}"))
        return int(literal)

    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise StrictJSONError(f"nested {depth} levels deep (at most {MAX_DEPTH})")
    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant,
                          parse_float=number, parse_int=integer)
        json.dumps(data, ensure_ascii=False).encode("utf-8")  # a lone surrogate is no text
        return data
    except UnicodeEncodeError as exc:
        code = ord(exc.object[exc.start])
        raise StrictJSONError(f"a string holds \\u{code:04x}, half of a surrogate pair, which is "
                              "not text (no store can keep it)",
                              _line_of(text, rf"(?i)\\u{code:04x}")) from None
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) \
            from None
    except RecursionError:
        raise StrictJSONError("nested too deeply") from None


def read_json_file(path: Path) -> Any:
    """A task file's JSON: read (at most ``MAX_FILE_BYTES``), decoded as UTF-8 and parsed
    strictly; every problem is a :class:`StrictJSONError` (``OSError`` for an unreadable
    file)."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    return loads_strict_bytes(data)


def loads_strict_bytes(data: bytes) -> Any:
    """:func:`loads_strict` of a file's bytes: at most ``MAX_FILE_BYTES``, UTF-8."""
    if len(data) > MAX_FILE_BYTES:
        raise StrictJSONError(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; a task file "
                              "holds steps, not data (put data in an artifact)")
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark, as some editors write, is fine
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise StrictJSONError(f"not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file "
                              "as UTF-8", line) from None
    return loads_strict(text)


def _depth(text: str) -> int:
    """How deep brackets nest outside strings (cheap: one pass, no recursion)."""
    deepest = level = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


def _duplicate_line(text: str, key: str) -> int | None:
    """The line of the second ``"key":`` (a best guess: JSON parsers report no positions)."""
    matches = list(re.finditer(rf"\"{re.escape(key)}\"\s*:", text))
    if len(matches) < 2:
        return None
    return text.count("\n", 0, matches[1].start()) + 1

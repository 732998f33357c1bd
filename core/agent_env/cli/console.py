"""What the CLI prints for people: one ``echo`` for every human-facing line, with control and
format characters escaped.

Why: ids and names come from files anyone can write (a step id, a file name, an env's card);
a right-to-left override (U+202E) or an escape sequence in one would reorder or rewrite what
the terminal shows. Every such character is shown as its escape (``\\u202e``, ``\\x1b``);
newlines and tabs are kept. JSON output (``--json``) is not touched: it is escaped by JSON.
"""

from __future__ import annotations

import re
import sys

#: C0 and C1 controls (but tab and newline), DEL, and the bidi, zero-width and line/paragraph
#: separator characters (Unicode Cf, Zl, Zp) that change how a line reads.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f"
                     "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control or format character escaped (newlines and tabs kept)."""
    return _HIDDEN.sub(_escape, text)


def echo(text: object = "", *, err: bool = False) -> None:
    """Print one line for people (stdout, or stderr with ``err``), flushed, escaped."""
    stream = sys.stderr if err else sys.stdout
    stream.write(printable(str(text)) + "\n")
    stream.flush()

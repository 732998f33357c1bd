"""The gateway's trajectory, kept in a file so memory stays flat however long an env runs.

Why: the gateway used to keep every event (arguments and results included) in a list; a
hostile test grew it from 65 to 149 MB over 40k calls, and a 5 MB result added 10 MB each.
Here an event is written as one JSON line when it happens, and memory holds only its offset
(8 bytes). ``GET /trajectory`` pages through the file (``offset``/``limit``, in events) and
streams what it sends in chunks, so a reader does not load it whole either. ``clear()`` empties
it (a reused env's next episode starts with an empty trajectory).
"""

from __future__ import annotations

import json
import tempfile
from array import array
from collections.abc import Iterator
from typing import Any

CHUNK = 64 * 1024
#: One encoder for every event (``json.dumps`` with options builds a new one per call).
_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str).encode


class TrajectoryLog:
    """Append-only JSON lines in an unnamed temporary file (``folder``: where; default the
    system's temp folder), offsets in memory. Not thread-safe: one event loop uses it."""

    def __init__(self, folder: str | None = None) -> None:
        self._file = tempfile.TemporaryFile(dir=folder, prefix="agentenv-trajectory-")
        self._offsets = array("Q")
        self._end = 0
        self._moved = False

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._end

    def append(self, event: dict[str, Any]) -> None:
        line = _ENCODE(event) + "\n"
        # backslashreplace: a lone surrogate (undecodable input) becomes its JSON escape.
        data = line.encode("utf-8", "backslashreplace")
        if self._moved:  # a read moved the position (a seek flushes: only when needed)
            self._file.seek(self._end)
            self._moved = False
        self._file.write(data)
        self._offsets.append(self._end)
        self._end += len(data)

    def chunks(self, offset: int = 0, limit: int | None = None) -> Iterator[bytes]:
        """The JSON lines of events ``offset`` .. ``offset + limit``, in chunks of 64 KiB."""
        count = len(self._offsets)
        start = min(max(offset, 0), count)
        stop = count if limit is None else min(count, start + max(limit, 0))
        if start >= stop:
            return
        position = self._offsets[start]
        end = self._offsets[stop] if stop < count else self._end
        self._file.flush()
        self._moved = True
        while position < end:
            self._file.seek(position)
            data = self._file.read(min(CHUNK, end - position))
            if not data:
                return
            position += len(data)
            yield data

    def events(self, offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """The events themselves (for tests and small reads)."""
        text = b"".join(self.chunks(offset, limit)).decode("utf-8")
        return [json.loads(line) for line in text.splitlines()]

    def clear(self) -> int:
        """Drop every event (the file is emptied); returns how many were dropped."""
        dropped = len(self._offsets)
        self._file.seek(0)
        self._file.truncate()
        self._moved = False
        self._offsets = array("Q")
        self._end = 0
        return dropped

    def close(self) -> None:
        self._file.close()

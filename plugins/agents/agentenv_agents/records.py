"""What the model gateway keeps about each model call, and the run's totals.

One :class:`ModelCall` per call the gateway answered (failed calls included: the status and
``error`` say who failed), appended to a :class:`CallRecorder`: JSON lines in a temporary file
(memory stays flat), optionally mirrored to a JSON-lines file as calls finish, so a run's
trajectory and summary can read them.
Records are attrs classes; ``to_dict`` / ``from_dict`` (cattrs) are the edge to JSON.
"""

from __future__ import annotations

import json
import tempfile
import threading
from array import array
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs

#: The four wire formats the gateway speaks (``generate_content``: Google's Gemini API).
Api = Literal["chat_completions", "responses", "messages", "generate_content"]

_converter = cattrs.Converter()


@attrs.define
class ModelCall:
    """One model call as the agent saw it.

    ``model`` is the model that answered (from the response; ``scripted:<name>`` for the scripted
    model; when the answer names none, the model asked of the upstream after aliases),
    ``requested_model`` what the agent asked for. Token counts are the upstream's own
    usage numbers; ``input_tokens`` includes Anthropic's cache-read and cache-creation tokens
    (OpenAI's ``prompt_tokens`` already does). ``status`` is the HTTP status the agent got; a
    failure's ``error`` starts with who failed: ``upstream`` (it answered with that status),
    ``upstream unreachable``, ``scripted`` or ``gateway`` (refused before forwarding).
    ``latency_ms`` runs from the request reaching the gateway to its last byte leaving it;
    ``first_byte_ms`` to the first byte of the answer (the same for non-streamed calls).
    ``response`` is the upstream's JSON body, or for a stream the response assembled from its
    events (the events themselves are not kept).
    """

    api: Api
    upstream: str
    requested_model: str | None
    model: str | None
    stream: bool
    status: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    latency_ms: float = 0.0
    first_byte_ms: float | None = None
    error: str | None = None
    started_at: float = 0.0
    usage: dict[str, Any] | None = None
    request: dict[str, Any] | None = None
    response: Any = None
    #: who made it, when the gateway gave that caller a token of its own (the agent's name)
    caller: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status < 400

    def to_dict(self) -> dict[str, Any]:
        return _converter.unstructure(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCall:
        return _converter.structure(data, cls)


@attrs.define
class ModelTotals:
    """What a run summary counts: calls, failed calls, and tokens (calls without usage add 0)."""

    calls: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return _converter.unstructure(self)


class CallRecorder:
    """Collects :class:`ModelCall` records and, with ``path``, appends each as one JSON line as
    it is recorded (flushed per line, so a run that dies keeps what happened).

    The records themselves live in an unnamed temporary file (``folder``: where), one JSON line
    each, and memory holds only their offsets and the totals: a call keeps its whole request
    (30 MB bodies are real), and a gateway that kept them in a list grew by every one of them
    for the sandbox's life. :meth:`lines` pages through them by bytes."""

    def __init__(self, path: str | Path | None = None, *, folder: str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._totals = ModelTotals()
        self._lock = threading.Lock()
        self._spill = tempfile.TemporaryFile(prefix="agentenv-model-calls-", dir=folder)
        self._offsets = array("Q")
        self._end = 0
        self._file = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    def record(self, call: ModelCall, raw_request: bytes | None = None) -> None:
        """Keep ``call``. ``raw_request``: the body ``call.request`` was parsed from, written
        into the line as it came instead of encoded again (a 200 KB history costs 0.5 ms to
        encode, on every model call of an agent deep in its task)."""
        try:
            line = _line(call, raw_request)
        except RecursionError:  # a request nested too deep to write back: keep the rest
            line = json.dumps(attrs.evolve(call, request=None, response=None).to_dict(),
                              default=str) + "\n"
        data = line.encode("utf-8", "backslashreplace")
        with self._lock:
            self._spill.seek(self._end)
            self._spill.write(data)
            self._offsets.append(self._end)
            self._end += len(data)
            totals = self._totals
            totals.calls += 1
            totals.errors += 0 if call.ok else 1
            totals.input_tokens += call.input_tokens or 0
            totals.output_tokens += call.output_tokens or 0
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    def __len__(self) -> int:
        return len(self._offsets)

    def lines(self, after: int = 0, max_bytes: int | None = None) -> list[bytes]:
        """The JSON lines (newline dropped) of the calls after the first ``after``, stopping
        before ``max_bytes`` would be passed (at least one line, however long)."""
        with self._lock:
            count = len(self._offsets)
            start = min(max(after, 0), count)
            if start >= count:
                return []
            stop, total = start, 0
            while stop < count:
                end = self._offsets[stop + 1] if stop + 1 < count else self._end
                size = end - self._offsets[stop]
                if max_bytes is not None and stop > start and total + size > max_bytes:
                    break
                total += size
                stop += 1
            self._spill.flush()
            self._spill.seek(self._offsets[start])
            data = self._spill.read(total)
        return data.rstrip(b"\n").split(b"\n")

    @property
    def calls(self) -> list[ModelCall]:
        """Every record, read back (for tests and small reads; the server pages)."""
        return [ModelCall.from_dict(json.loads(line)) for line in self.lines()]

    def totals(self) -> ModelTotals:
        with self._lock:
            return attrs.evolve(self._totals)

    def close(self) -> None:
        """Close the mirror file; the records stay readable (their temporary file goes with
        the recorder)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    @staticmethod
    def read(path: str | Path) -> list[ModelCall]:
        """The records a JSON-lines file holds (for summaries written after the run)."""
        with Path(path).open(encoding="utf-8") as lines:
            return [ModelCall.from_dict(json.loads(line)) for line in lines if line.strip()]


def _line(call: ModelCall, raw_request: bytes | None) -> str:
    """``call`` as one JSON line; its request spliced from ``raw_request`` when that is a UTF-8
    JSON object (a newline in JSON text can only be whitespace between tokens, so it becomes a
    space), else encoded from ``call.request``."""
    if raw_request is not None and call.request is not None:
        try:
            text = raw_request.decode("utf-8").strip()
        except UnicodeDecodeError:
            text = ""
        if text.startswith("{") and text.endswith("}"):
            data = attrs.evolve(call, request=None).to_dict()
            data.pop("request", None)
            head = json.dumps(data, default=str)
            text = text.replace("\r", " ").replace("\n", " ")
            return f'{head[:-1]}, "request": {text}}}\n'  # a call has fields besides it
    return json.dumps(call.to_dict(), default=str) + "\n"

"""Errors that cross the wire: their shape is part of the protocol, so it lives in one place."""

from __future__ import annotations

from typing import Any, Literal

Applied = Literal["no", "yes", "partial", "unknown"]


class AgentEnvError(Exception):
    """A tool or extension failure the caller can act on.

    A tool raising it answers an ``isError`` result with ``"<code>: <message>"`` text and the
    fields as ``structuredContent``; an extension raising it answers HTTP ``status`` with the
    ``{"ok": false, "error": {...}}`` body. ``applied`` says whether the side effect happened.
    """

    def __init__(
        self,
        code: str,
        message: str,
        retryable: bool = False,
        applied: str = "no",
        hint: str | None = None,
        *,
        status: int = 400,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.applied = applied
        self.hint = hint
        self.status = status

    def to_dict(self) -> dict[str, Any]:
        """The wire body shared by tool results and extension errors (``hint`` only when set)."""
        body: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "applied": self.applied,
        }
        if self.hint is not None:
            body["hint"] = self.hint
        return body

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ProtocolError(Exception):
    """A JSON-RPC error answered by a peer (data plane or MCP), kept with its exact code."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.data = data


class TransportError(Exception):
    """A peer answered with an HTTP status or body we cannot use (not a JSON-RPC error)."""

    def __init__(self, message: str, status: int | None = None, *,
                 unsent: bool = False) -> None:
        super().__init__(message)
        self.status = status
        #: No connection could be opened: the request surely never reached the peer.
        self.unsent = unsent

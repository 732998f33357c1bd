"""Errors a user can fix.

The CLI prints a :class:`UserError` as one line ``Error: <message>`` (plus its notes) and exits
1, without a traceback; anything else is a defect and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem in the user's input, config or environment that the message tells how to fix."""

    def __init__(self, message: str, *, notes: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.notes = list(notes or [])


class ConfigError(UserError):
    """The config file, an ``AGENT_ENV_*`` variable or a reference in them is wrong."""


class MissingPluginError(UserError):
    """Config names a backend that no installed plugin provides."""


#: What a bare exception of these kinds means, in words (their messages are often empty).
_PLAIN_WORDS: dict[str, str] = {
    "TimeoutError": "timed out",
    "CancelledError": "cancelled",
    "ConnectionRefusedError": "connection refused",
    "ConnectionResetError": "connection reset",
    "ServerDisconnectedError": "the server closed the connection",
    "ClientPayloadError": "the answer was cut off",
    "BrokenPipeError": "the connection broke",
    "EOFError": "the connection ended early",
}


def cause(exc: BaseException) -> str:
    """``exc`` as a user reads it: its message, or what its kind means when it has none, not
    its class name (``TimeoutError()`` is "timed out")."""
    for kind in type(exc).__mro__:
        words = _PLAIN_WORDS.get(kind.__name__)
        if words is not None:
            text = str(exc).strip()
            return f"{words} ({text})" if text and text != words else words
    text = str(exc).strip()
    if isinstance(exc, KeyError) and exc.args:
        return f"missing key {exc.args[0]!r}"
    return text or f"an unexpected {type(exc).__name__}"

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

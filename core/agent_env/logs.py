"""Logging: structlog, configured once by the CLI (or by the first logger asked for).

Readable lines on stderr by default, JSON lines with ``--log-json`` / ``AGENT_ENV_LOG_JSON=1``,
debug with ``-v``. Only our loggers are configured; third-party libraries stay at WARNING.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

_CONFIGURED = False


class _CurrentStderr:
    """Writes each line to whatever ``sys.stderr`` is now (test capture, redirects)."""

    def msg(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


def _stderr_logger(*args: Any) -> _CurrentStderr:
    return _CurrentStderr()


def configure_logging(*, verbose: bool = False, json_lines: bool | None = None) -> None:
    """Set up structlog for ``agent_env`` loggers; call again to change the settings."""
    global _CONFIGURED
    import structlog

    if json_lines is None:
        json_lines = os.environ.get("AGENT_ENV_LOG_JSON", "") not in ("", "0")
    level = logging.DEBUG if verbose else logging.INFO
    renderer: Any
    if json_lines:
        renderer = structlog.processors.JSONRenderer()
    else:
        colors = sys.stderr.isatty() and "NO_COLOR" not in os.environ
        renderer = structlog.dev.ConsoleRenderer(colors=colors)
    structlog.configure(
        processors=[
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info if json_lines else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    _CONFIGURED = True


def get_logger(name: str) -> Any:
    """A structlog logger for ``agent_env.<name>``."""
    import structlog

    if not _CONFIGURED:
        configure_logging()
    return structlog.get_logger(f"agent_env.{name}").bind(logger=name)

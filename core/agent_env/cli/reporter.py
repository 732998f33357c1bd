"""The terminal reporter: a built-in plugin that prints runs as they happen, from the public run
events (``agent_env_run_event``), as pytest's terminal reporter is a plugin of pytest.

It prints only while a command has made a printer active (:func:`reporting`, which the run
path, :mod:`agent_env.runs`, uses for ``run``, ``task run`` and a group's runs); runs started
elsewhere (the episode API, a runner's workers) print nothing through it.
The printer lives in the runtime's state, so two runtimes report apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agent_env.hookspecs import hookimpl

if TYPE_CHECKING:
    from agent_env.cli.progress import ProgressPrinter

#: Where the runtime keeps the active printer (``current().state``).
PRINTER_STATE = "agent_env.terminal_reporter"


@contextlib.contextmanager
def reporting(printer: ProgressPrinter) -> Iterator[ProgressPrinter]:
    """Print the current runtime's run events with ``printer`` for the code inside."""
    from agent_env.runtime import current

    state = current().state
    previous = state.get(PRINTER_STATE)
    state[PRINTER_STATE] = printer
    try:
        yield printer
    finally:
        printer.close()
        if previous is None:
            state.pop(PRINTER_STATE, None)
        else:
            state[PRINTER_STATE] = previous


@hookimpl
def agent_env_run_event(event: Any) -> None:
    from agent_env.runtime import current

    printer = current().state.get(PRINTER_STATE)
    if printer is not None:
        printer.event(event)

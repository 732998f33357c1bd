"""What a run prints while it happens, read from the public run events (``agent_env_run_event``).

The terminal reporter (:mod:`agent_env.cli.reporter`, a built-in plugin) hands each event to
the printer a command made active: plain lines, the same on a terminal and in a pipe so logs
diff cleanly, and on a terminal (:class:`LiveProgress`) one status line of what runs now,
redrawn in place and erased before every permanent line. A printer writes to the stream that
was ``sys.stdout`` when it was made (hooks run with stdout sent to stderr; ``--json`` makes it
on stderr on purpose).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from agent_env.cli.console import echo, printable


def seconds(value: float) -> str:
    return f"{value:.1f}s"


class ProgressPrinter:
    """Plain progress lines, one per step start, step end, note and run end."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stdout

    def write(self, text: str) -> None:
        self.stream.write(printable(text) + "\n")
        self.stream.flush()

    def event(self, event: Any) -> None:
        """Print what ``event`` (a :class:`~agent_env.events.RunEvent`) says, if anything."""
        handler = getattr(self, f"on_{event.kind}", None)
        if handler is not None:
            handler(event, str(event.detail.get("label") or event.task_id))

    def on_step_started(self, event: Any, label: str) -> None:
        where = f"step {event.detail.get('position')}/{event.detail.get('total')}"
        self.write(f"[{label}] {where} {event.step_id} ({event.step_type})")

    def on_step_finished(self, event: Any, label: str) -> None:
        where = f"step {event.detail.get('position')}/{event.detail.get('total')}"
        took = seconds(event.duration_seconds or 0.0)
        if event.error is None:
            self.write(f"[{label}] {where} {event.step_id} done in {took}")
            return
        tolerated = "" if event.detail.get("fatal", True) else " (tolerated)"
        self.write(f"[{label}] {where} {event.step_id} failed in {took}{tolerated}: "
                   f"{event.error}")
        echo(f"error: {label}: step '{event.step_id}' ({event.step_type}) failed: "
             f"{event.error}", err=True)

    def on_note(self, event: Any, label: str) -> None:
        self.write(f"[{label}] {event.detail.get('text', '')}")

    def on_run_finished(self, event: Any, label: str) -> None:
        self.write(f"[{label}] {event.outcome} in {seconds(event.duration_seconds or 0.0)}")

    def close(self) -> None:
        """Nothing to clean up for plain lines."""


class LiveProgress(ProgressPrinter):
    """On a terminal: the same lines, plus one status line that shows what is running now.

    The status line (running steps with their elapsed time) is redrawn in place by a small
    thread, and erased before every permanent line, so what stays on screen is exactly what a
    pipe would get.
    """

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self.running: dict[tuple[str, str], tuple[str, float]] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._redraw_loop, daemon=True)
        self.thread.start()

    def _status(self) -> str:
        import shutil

        now = time.monotonic()
        parts = [f"{label} {seconds(now - started)}" for label, started in self.running.values()]
        width = shutil.get_terminal_size((100, 20)).columns - 1
        text = "running: " + ", ".join(parts) if parts else ""
        return text[:width]

    def _redraw_loop(self) -> None:
        while not self.stopped.wait(0.2):
            with self.lock:
                if self.running:
                    self.stream.write("\r\x1b[K" + printable(self._status()))
                    self.stream.flush()

    def _erase(self) -> None:
        self.stream.write("\r\x1b[K")
        self.stream.flush()

    def write(self, text: str) -> None:
        with self.lock:
            self._erase()
            super().write(text)

    def on_step_started(self, event: Any, label: str) -> None:
        with self.lock:
            self.running[(label, str(event.step_id))] = (f"[{label}] {event.step_id}",
                                                         time.monotonic())
        super().on_step_started(event, label)

    def on_step_finished(self, event: Any, label: str) -> None:
        with self.lock:
            self.running.pop((label, str(event.step_id)), None)
        super().on_step_finished(event, label)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=1)
        with self.lock:
            self._erase()


def progress_for_stdout() -> ProgressPrinter:
    """Live status on a terminal (unless TERM=dumb); plain lines in a pipe."""
    import os

    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        return LiveProgress()
    return ProgressPrinter()

"""What a run prints while it happens, read from the public run events (``agent_env_run_event``).

The terminal reporter (:mod:`agent_env.cli.reporter`, a built-in plugin) hands each event to
the printer a command made active: plain lines, the same on a terminal and in a pipe so logs
diff cleanly, and on a terminal (:class:`LiveProgress`) one status line, redrawn in place and
erased before every permanent line. A printer writes to the stream that was ``sys.stdout`` when
it was made (hooks run with stdout sent to stderr; ``--json`` makes it on stderr on purpose).

Two modes, one printer: a few runs (``agent-env run``, ``task run``) print a line per step and
the status line shows the running steps; a group of many runs (``eval run``, ``run-batch``:
``group_total`` set) prints a line per finished run (``slot_*`` events) and the status line
counts done, running, failed and errors with an ETA, with permanent lines only for runs that did
not pass.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from agent_env.cli.console import echo, printable


def seconds(value: float) -> str:
    return f"{value:.1f}s"


#: The events a group's printer shows; a few runs' printer shows every other kind.
GROUP_KINDS = frozenset({"slot_started", "slot_finished"})


class ProgressPrinter:
    """Plain progress lines: one per step start, step end, note and run end; in a group, one per
    finished run."""

    def __init__(self, stream: Any = None, *, group_total: int | None = None) -> None:
        from agent_env.plugins.discovery import unrouted_stdout

        self.stream = stream or unrouted_stdout()
        #: a group's size (its mode: see the module doc), and its runs done so far
        self.group_total = group_total
        self.done = 0

    def write(self, text: str) -> None:
        self.stream.write(printable(text) + "\n")
        self.stream.flush()

    def event(self, event: Any) -> None:
        """Print what ``event`` (a :class:`~agent_env.events.RunEvent`) says, if anything."""
        if (event.kind in GROUP_KINDS) != (self.group_total is not None):
            return
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

    def slot_line(self, event: Any, label: str) -> str:
        how, took = event.detail.get("described", event.outcome), seconds(
            event.duration_seconds or 0.0)
        if event.detail.get("retrying"):
            return (f"[{label}] {how}, {took}; retrying (attempt "
                    f"{event.detail.get('attempts', 1) + 1})")
        reused = " (reused)" if event.detail.get("reused") else ""
        return (f"[{label}] {how}, {took}{reused} ({self.done}/{self.group_total}, "
                f"instance {event.instance_id})")

    def on_slot_finished(self, event: Any, label: str) -> None:
        if not event.detail.get("retrying"):
            self.done += 1
        self.write(self.slot_line(event, label))

    def close(self) -> None:
        """Nothing to clean up for plain lines."""


class LiveProgress(ProgressPrinter):
    """On a terminal: a status line of what is running now, redrawn in place by a small thread
    and erased before every permanent line. For a few runs, the permanent lines are the plain
    ones, so what stays on screen is exactly what a pipe would get; for a group, only runs that
    did not pass (or are retried) leave a line.
    """

    def __init__(self, stream: Any = None, *, group_total: int | None = None) -> None:
        super().__init__(stream, group_total=group_total)
        self.running: dict[tuple[str, str], tuple[str, float]] = {}
        #: a group's counts: runs in flight, done without passing, ended in error, run here
        self.slots_running = self.failed = self.errors = self.fresh = 0
        self.started_at = time.monotonic()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._redraw_loop, daemon=True)
        self.thread.start()

    def _status(self) -> str:
        import shutil

        now = time.monotonic()
        if self.group_total is not None:
            elapsed, left = now - self.started_at, self.group_total - self.done
            eta = f", ETA {elapsed / self.fresh * left:.0f}s" if self.fresh and left else ""
            text = (f"{self.done}/{self.group_total} done, {self.slots_running} running, "
                    f"{self.failed} failed, {self.errors} errors, {elapsed:.0f}s{eta}")
        else:
            parts = [f"{label} {seconds(now - started)}"
                     for label, started in self.running.values()]
            text = "running: " + ", ".join(parts) if parts else ""
        width = shutil.get_terminal_size((100, 20)).columns - 1
        return text[:width]

    def _redraw(self) -> None:
        self.stream.write("\r\x1b[K" + printable(self._status()))
        self.stream.flush()

    def _redraw_loop(self) -> None:
        while not self.stopped.wait(0.2):
            with self.lock:
                if self.running or (self.group_total is not None and self.slots_running):
                    self._redraw()

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

    def on_slot_started(self, event: Any, label: str) -> None:
        with self.lock:
            self.slots_running += 1
            self._redraw()

    def on_slot_finished(self, event: Any, label: str) -> None:
        from agent_env.tasks import scores

        retrying, reused = event.detail.get("retrying"), event.detail.get("reused")
        with self.lock:
            if not reused:
                self.slots_running -= 1
            if not retrying:
                self.done += 1
                self.fresh += 0 if reused else 1
                self.failed += event.outcome not in {*scores.SUCCESS, scores.ERROR}
                self.errors += event.outcome == scores.ERROR
        if retrying or event.outcome not in scores.SUCCESS:
            self.write(self.slot_line(event, label))
        with self.lock:
            self._redraw()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=1)
        with self.lock:
            self._erase()


def progress_for_stdout(*, group_total: int | None = None) -> ProgressPrinter:
    """Live status on a terminal (unless TERM=dumb); plain lines in a pipe."""
    import os

    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        return LiveProgress(group_total=group_total)
    return ProgressPrinter(group_total=group_total)

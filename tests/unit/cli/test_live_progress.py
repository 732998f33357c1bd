"""The terminal progress display: a live status line that leaves only the plain lines behind."""

from __future__ import annotations

import re
import sys
import time

from agent_env.cli.progress import LiveProgress, ProgressPrinter
from agent_env.events import RunEvent


def _final_screen(text: str) -> list[str]:
    """What a terminal shows: ``\\r`` and erase-line drop what was drawn on the line so far."""
    lines = []
    for raw in text.split("\n"):
        visible = re.split(r"\r\x1b\[K|\r", raw)[-1]
        lines.append(visible)
    return [line for line in lines if line]


def _play(printer: ProgressPrinter) -> None:
    where = {"label": "tasks/t.json", "position": 1, "total": 1}
    step = {"step_id": "wait", "step_type": "verify_sandbox", "detail": where}
    printer.event(RunEvent("step_started", "t-1", "t", "now", **step))
    time.sleep(0.5)  # long enough for the status line to be drawn at least once
    printer.event(RunEvent("step_finished", "t-1", "t", "now", outcome="completed",
                           duration_seconds=0.5, **step))
    printer.close()


def test_live_progress_draws_a_status_line_and_leaves_the_plain_lines(capsys) -> None:
    _play(ProgressPrinter())
    plain = capsys.readouterr().out
    _play(LiveProgress(stream=sys.stdout))
    live = capsys.readouterr().out
    assert "running: [tasks/t.json] wait" in live  # the status was shown while it ran
    assert _final_screen(live) == _final_screen(plain)

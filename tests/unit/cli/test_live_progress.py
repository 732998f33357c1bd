"""The terminal progress display: a live status line that leaves only the plain lines behind."""

from __future__ import annotations

import re
import sys
import time
from types import SimpleNamespace

from agent_env.cli.run_cmd import LiveProgress, ProgressPrinter


def _final_screen(text: str) -> list[str]:
    """What a terminal shows: ``\\r`` and erase-line drop what was drawn on the line so far."""
    lines = []
    for raw in text.split("\n"):
        visible = re.split(r"\r\x1b\[K|\r", raw)[-1]
        lines.append(visible)
    return [line for line in lines if line]


def _play(printer: ProgressPrinter) -> None:
    task = SimpleNamespace(label="tasks/t.json")
    step = SimpleNamespace(id="wait", type="verify_sandbox")
    printer.step_started(task, 1, 1, step)
    time.sleep(0.5)  # long enough for the status line to be drawn at least once
    printer.step_finished(task, 1, 1, step, 0.5, None)
    printer.close()


def test_live_progress_draws_a_status_line_and_leaves_the_plain_lines(capsys) -> None:
    _play(ProgressPrinter())
    plain = capsys.readouterr().out
    _play(LiveProgress(stream=sys.stdout))
    live = capsys.readouterr().out
    assert "running: [tasks/t.json] wait" in live  # the status was shown while it ran
    assert _final_screen(live) == _final_screen(plain)

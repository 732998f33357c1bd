"""A group's progress, from its slot events: plain lines per run in a pipe; one redrawn status
line (done/running/failed/ETA) on a terminal, with permanent lines only for runs that did not
pass."""

from __future__ import annotations

import io

from agent_env.cli.progress import LiveProgress, ProgressPrinter
from agent_env.events import RunEvent


def finished(sample: int, outcome: str, described: str, *, retrying: bool = False) -> RunEvent:
    return RunEvent("slot_finished", f"t-{sample:08d}", "t", "now", outcome=outcome,
                    duration_seconds=0.25,
                    detail={"label": f"t v1 #{sample}", "described": described, "attempts": 1,
                            "retrying": retrying, "reused": False})


def started(sample: int) -> RunEvent:
    return RunEvent("slot_started", "", "t", "now", detail={"label": f"t v1 #{sample}"})


def test_plain_lines_name_the_run_its_outcome_and_the_count() -> None:
    stream = io.StringIO()
    progress = ProgressPrinter(stream, group_total=2)
    progress.event(started(1))
    progress.event(finished(1, "passed", "passed (v: 1)"))
    progress.event(finished(2, "error", "error", retrying=True))
    assert stream.getvalue().splitlines() == [
        "[t v1 #1] passed (v: 1), 0.2s (1/2, instance t-00000001)",
        "[t v1 #2] error, 0.2s; retrying (attempt 2)"]


def test_a_group_printer_ignores_step_events_and_a_runs_printer_ignores_slots() -> None:
    step = RunEvent("step_started", "t-1", "t", "now", step_id="s", step_type="x",
                    detail={"label": "t", "position": 1, "total": 1})
    group, single = io.StringIO(), io.StringIO()
    ProgressPrinter(group, group_total=1).event(step)
    ProgressPrinter(single).event(finished(1, "passed", "passed"))
    assert group.getvalue() == "" and single.getvalue() == ""


def test_the_live_line_counts_done_running_failed_errors_with_an_eta() -> None:
    stream = io.StringIO()
    progress = LiveProgress(stream, group_total=4)
    try:
        for sample in (1, 2, 3):
            progress.event(started(sample))
        progress.event(finished(1, "passed", "passed (v: 1)"))
        progress.event(finished(2, "scored below 1", "scored below 1 (v: 0)"))
        status = progress._status()
        assert status.startswith("2/4 done, 1 running, 1 failed, 0 errors, ")
        assert "ETA" in status
        permanent = [line.split("\x1b[K")[-1] for line in stream.getvalue().split("\n")[:-1]]
        assert permanent == ["[t v1 #2] scored below 1 (v: 0), 0.2s (2/4, instance t-00000002)"]
    finally:
        progress.close()
    assert stream.getvalue().endswith("\r\x1b[K")

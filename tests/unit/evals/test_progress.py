"""Progress: plain lines per run in a pipe; one redrawn status line (done/running/failed/ETA)
on a terminal, with permanent lines only for runs that did not pass."""

from __future__ import annotations

import io

from agent_env.evals.execute import LiveProgress, PlainProgress
from agent_env.evals.groups import Slot
from agent_env.evals.report import EvalRun
from agent_env.tasks.engine import TaskResult
from agent_env.tasks.plan import TaskSpec


def run(sample: int, outcome: str, scores: dict[str, float]) -> EvalRun:
    result = TaskResult(TaskSpec("t", "t", ()), f"t-{sample:08d}", outcome, scores, [], [], 0.25)
    return EvalRun(Slot(sample - 1, "t", 1, sample), result, None, (result.instance_id,))


def test_plain_lines_name_the_run_its_outcome_and_the_count() -> None:
    lines: list[str] = []
    progress = PlainProgress(2, lines.append)
    progress.finished(run(1, "passed", {"v": 1.0}))
    progress.finished(run(2, "error", {}), retrying=True)
    assert lines == ["[t v1 #1] passed (v: 1), 0.2s (1/2, instance t-00000001)",
                     "[t v1 #2] error, 0.2s; retrying (attempt 2)"]


def test_the_live_line_counts_done_running_failed_errors_with_an_eta() -> None:
    stream = io.StringIO()
    lines: list[str] = []
    progress = LiveProgress(4, lines.append, stream)
    progress.ticker = object()  # type: ignore[assignment]  # no event loop here: no redraw task
    for sample in (1, 2, 3):
        progress.started(Slot(sample - 1, "t", 1, sample))
    progress.finished(run(1, "passed", {"v": 1.0}))
    progress.finished(run(2, "scored below 1", {"v": 0.0}))
    status = progress.status()
    assert status.startswith("2/4 done, 1 running, 1 failed, 0 errors, ")
    assert "ETA" in status
    assert lines == ["[t v1 #2] scored below 1 (v: 0), 0.2s (2/4, instance t-00000002)"]
    assert stream.getvalue().endswith("\r\x1b[K" + status)
    progress.ticker = None
    progress.close()
    assert stream.getvalue().endswith("\r\x1b[K")

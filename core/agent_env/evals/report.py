"""An eval's results: one row per run, a table per task with pass@k, the means, JSON and files.

"Passed" is the task's own outcome rule (every reported score >= 1). A run that ended in
``error`` (infrastructure, after its retries) is counted apart and left out of pass@k and the
mean score: it says nothing about the agent. A run's score is the mean of its reported scores;
a ``failed`` run without scores scores 0, an ``unscored`` one has none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.evals.groups import Group, Slot
from agent_env.evals.passk import pass_at_k
from agent_env.evals.stats import model_usage
from agent_env.plural import plural
from agent_env.tasks.scores import COMPLETED, ERROR, FAILED, PASSED, mean_score

if TYPE_CHECKING:
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.records import InstanceRecord


@attrs.frozen
class EvalRun:
    """One slot's run: the engine's result, its stored record and the attempts behind it."""

    slot: Slot
    result: TaskResult
    record: InstanceRecord | None
    attempts: tuple[str, ...]
    reused: bool = False

    @property
    def outcome(self) -> str:
        return self.result.outcome

    @property
    def score(self) -> float | None:
        mean = mean_score(self.result.scores)
        if mean is not None:
            return mean
        return 0.0 if self.outcome == FAILED else None


def result_from_record(record: InstanceRecord, label: str) -> TaskResult:
    """A stored run read back as the engine's result (a resume reuses finished runs so)."""
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.plan import TaskSpec

    return TaskResult(TaskSpec(record.task_id, label, (), record.task_version),
                      record.instance_id, record.outcome or "cancelled", dict(record.scores),
                      list(record.failures), list(record.completed_steps),
                      float(record.duration_seconds or 0.0), list(record.retried_failures),
                      record.cancel_reason)


def run_row(run: EvalRun) -> dict[str, Any]:
    """One JSONL row: ``agent-env run --json``'s run plus the slot, times, usage and attempts."""
    from agent_env.tasks.summary import run_json

    record = run.record
    return {**run_json(run.result), "sample": run.slot.sample, "seed": run.slot.seed,
            "score": run.score, "passed": run.outcome == PASSED,
            "started_at_utc": record.started_at_utc if record else None,
            "finished_at_utc": record.finished_at_utc if record else None,
            "model_usage": model_usage(record), "attempts": len(run.attempts),
            "retried_instance_ids": list(run.attempts[:-1]), "reused": run.reused}


@attrs.frozen
class TaskSummary:
    task_id: str
    task_version: int
    runs: int
    passed: int
    failed: int
    errors: int
    mean_score: float | None
    pass_at: Mapping[int, float | None]

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "task_version": self.task_version, "runs": self.runs,
                "passed": self.passed, "failed": self.failed, "errors": self.errors,
                "mean_score": self.mean_score,
                **{f"pass@{k}": v for k, v in self.pass_at.items()}}


def ks_for(k: int) -> tuple[int, ...]:
    return (1,) if k == 1 else (1, k)


def summarise(group: Group, runs: Sequence[EvalRun]) -> list[TaskSummary]:
    """One summary per task version, in the group's order."""
    keys = list(dict.fromkeys((s.task_id, s.task_version) for s in group.slots))
    table = []
    for task_id, version in keys:
        mine = [r for r in runs if (r.slot.task_id, r.slot.task_version) == (task_id, version)]
        done = [r for r in mine if r.outcome in COMPLETED]
        passed = sum(1 for r in done if r.outcome == PASSED)
        scored = [s for s in (r.score for r in done) if s is not None]
        table.append(TaskSummary(
            task_id, version, len(mine), passed, len(done) - passed,
            sum(1 for r in mine if r.outcome == ERROR),
            sum(scored) / len(scored) if scored else None,
            {k: pass_at_k(len(done), passed, k) if done else None for k in ks_for(group.k)}))
    return table


def mean_present(values: Iterable[float | None]) -> float | None:
    """The mean of the values that are there (None when none is)."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def means(group: Group, table: Sequence[TaskSummary]) -> dict[str, float | None]:
    """The eval's means over its tasks (a task without an estimate is left out, and said so)."""
    out: dict[str, float | None] = {"mean_score": mean_present([t.mean_score for t in table])}
    for k in ks_for(group.k):
        out[f"pass@{k}"] = mean_present([t.pass_at[k] for t in table])
    return out


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table_lines(group: Group, table: Sequence[TaskSummary]) -> list[str]:
    """The per-task table, then the means line (and what the means leave out)."""
    ks = ks_for(group.k)
    head = ["TASK", "VERSION", "RUNS", "PASSED", "FAILED", "ERRORS", "MEAN SCORE",
            *(f"PASS@{k}" for k in ks)]
    rows = [[t.task_id, f"v{t.task_version}", str(t.runs), str(t.passed), str(t.failed),
             str(t.errors), _cell(t.mean_score), *(_cell(t.pass_at[k]) for k in ks)]
            for t in table]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths, strict=True))).rstrip() for r in [head, *rows]]
    mean = means(group, table)
    parts = [f"mean score {_cell(mean['mean_score'])}",
             *(f"pass@{k} {_cell(mean[f'pass@{k}'])}" for k in ks)]
    lines.append(f"Means over {plural(len(table), 'task')}: "
                 + ", ".join(parts))
    short = [t.task_id for t in table if t.pass_at[ks[-1]] is None]
    if short:
        lines.append(f"  pass@{ks[-1]} has no estimate for {', '.join(short)}: fewer than "
                     f"{ks[-1]} completed runs (errors are not counted)")
    errors = sum(t.errors for t in table)
    if errors:
        lines.append(f"  {plural(errors, 'run')} ended in an infrastructure "
                     "error: not scored, left out of pass@k and the means")
    return lines


def summary_document(group: Group, runs: Sequence[EvalRun], exit_code: int,
                     missing: int) -> dict[str, Any]:
    """What ``--json`` prints and ``summary.json`` holds."""
    from agent_env.tasks.summary import summary_json

    table = summarise(group, runs)
    return {"group_id": group.group_id, "kind": group.kind, "id": group.subject_id,
            "version": group.subject_version, "k": group.k, "slots": len(group.slots),
            "not_run": missing, "tasks": [t.to_json() for t in table],
            "means": means(group, table), "counts": summary_json([r.result for r in runs]),
            "exit_code": exit_code}


def write_output_dir(folder: Path, group: Group, runs: Sequence[EvalRun],
                     summary: Mapping[str, Any], echo: Callable[[str], None]) -> None:
    """``runs.jsonl`` (one row per run, in slot order) and ``summary.json`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = folder / "runs.jsonl"
    with rows.open("w", encoding="utf-8") as out:
        for run in sorted(runs, key=lambda r: r.slot.index):
            out.write(json.dumps(run_row(run), default=str) + "\n")
    path = folder / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    echo(f"Wrote {rows} and {path}")

"""Which is better, and is it real: a leaderboard over an eval's stored runs, and two eval runs
compared task by task with a bootstrap confidence interval.

Why: pass@k per eval run is a table; eval authors choose between agents and models by
comparing them, and a difference of a few points on 20 tasks is often noise. A comparison
pairs the two runs by task (the same task in both), takes the difference in pass@1 and in mean
score over the tasks they share, and resamples those tasks (seeded, so ``eval report`` and the
explorer print the same numbers) for a 95% interval. When the interval includes zero it says
so in words. Runs that ended in an infrastructure ``error`` are left out everywhere, as in
pass@k: they say nothing about the agent.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from agent_env.evals.passk import pass_at_k
from agent_env.tasks.scores import COMPLETED, FAILED, PASSED

#: Resamples of the tasks behind each interval; the seed makes them repeatable.
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
CONFIDENCE = 0.95


@attrs.frozen
class RunPoint:
    """One finished run of a run group, as the comparisons read it."""

    group_id: str
    task_id: str
    outcome: str
    score: float | None
    agent: str
    model: str
    seconds: float | None = None
    tokens: float | None = None
    cost_usd: float | None = None
    instance_id: str | None = None

    @property
    def completed(self) -> bool:
        return self.outcome in COMPLETED

    @property
    def passed(self) -> bool:
        return self.outcome == PASSED


def group_points(documents: Any, group_id: str) -> list[RunPoint]:
    """The finished runs of run group ``group_id`` (slots not done yet are left out)."""
    from agent_env.evals.groups import DONE, GroupStore
    from agent_env.evals.report import model_usage
    from agent_env.tasks.records import StoredInstances

    store = GroupStore(documents)
    group = store.load(group_id)
    slots = store.slot_documents(group)
    instances = StoredInstances(documents)
    points = []
    for slot in group.slots:
        doc = slots.get(slot.index)
        if doc is None or doc.get("state") != DONE or not doc.get("instance_id"):
            continue
        record = instances.get(str(doc["instance_id"]))
        outcome = str(doc.get("outcome") or (record.outcome if record else "") or "")
        scores = dict(record.scores) if record is not None else {}
        score = (sum(scores.values()) / len(scores) if scores
                 else 0.0 if outcome == FAILED else None)
        usage = model_usage(record)
        tokens = (usage.get("input_tokens", 0) + usage.get("output_tokens", 0)) if usage \
            else None
        points.append(RunPoint(
            group_id, slot.task_id, outcome, score,
            (record.agents if record else None) or "-", (record.models if record else None)
            or "-", record.duration_seconds if record else None, tokens,
            usage.get("cost_usd") if usage else None, str(doc["instance_id"])))
    return points


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


@attrs.frozen
class BoardRow:
    """One agent x model over the runs of an eval: what the leaderboard shows."""

    agent: str
    model: str
    runs: int
    errors: int
    tasks: int
    k: int
    pass_at_1: float | None
    pass_at_k: float | None
    mean_score: float | None
    seconds_per_run: float | None
    tokens_per_run: float | None
    cost_per_run: float | None
    groups: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "model": self.model, "runs": self.runs,
                "errors": self.errors, "tasks": self.tasks, "k": self.k,
                "pass@1": self.pass_at_1, f"pass@{self.k}": self.pass_at_k,
                "mean_score": self.mean_score, "seconds_per_run": self.seconds_per_run,
                "tokens_per_run": self.tokens_per_run, "cost_per_run": self.cost_per_run,
                "run_groups": list(self.groups)}


def leaderboard(points: Sequence[RunPoint], k: int = 1) -> list[BoardRow]:
    """One row per agent x model, best pass@1 first. pass@1 and pass@k are the unbiased
    estimates per task, averaged over the tasks with enough completed runs; the means are per
    completed run."""
    by_pair: dict[tuple[str, str], list[RunPoint]] = {}
    for point in points:
        by_pair.setdefault((point.agent, point.model), []).append(point)
    rows = []
    for (agent, model), mine in by_pair.items():
        done = [p for p in mine if p.completed]
        per_task: dict[str, list[RunPoint]] = {}
        for point in done:
            per_task.setdefault(point.task_id, []).append(point)
        at_1 = _mean(pass_at_k(len(runs), sum(p.passed for p in runs), 1)
                     for runs in per_task.values())
        at_k = _mean(pass_at_k(len(runs), sum(p.passed for p in runs), k)
                     if len(runs) >= k else None for runs in per_task.values())
        rows.append(BoardRow(
            agent, model, len(done), len(mine) - len(done), len(per_task), k, at_1, at_k,
            _mean(p.score for p in done), _mean(p.seconds for p in done),
            _mean(p.tokens for p in done), _mean(p.cost_usd for p in done),
            tuple(sorted({p.group_id for p in mine}))))
    return sorted(rows, key=lambda r: (-(r.pass_at_1 or 0.0), r.agent, r.model))


@attrs.frozen
class Interval:
    """A difference (A minus B) over paired tasks, and its bootstrap interval."""

    difference: float
    low: float
    high: float
    tasks: int

    @property
    def includes_zero(self) -> bool:
        return self.low <= 0.0 <= self.high

    def to_json(self) -> dict[str, Any]:
        return {"difference": self.difference, "ci_low": self.low, "ci_high": self.high,
                "confidence": CONFIDENCE, "tasks": self.tasks,
                "includes_zero": self.includes_zero}


@attrs.frozen
class Comparison:
    """Two run groups, A and B, paired by task."""

    a: str
    b: str
    common: tuple[str, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    pass_a: float | None
    pass_b: float | None
    pass_diff: Interval | None
    score_diff: Interval | None
    #: tasks A passed (most of its runs) and B did not, and the other way round
    better_in_a: tuple[str, ...]
    better_in_b: tuple[str, ...]
    errors_a: int
    errors_b: int
    seed: int
    resamples: int

    def statement(self) -> str:
        """What the numbers say, in words."""
        if not self.common:
            return (f"{self.a} and {self.b} have no task in common (with a completed run): "
                    "there is nothing to compare")
        diff = self.pass_diff
        if diff is None:
            return "no pass rate to compare"
        pct = f"{abs(diff.difference) * 100:.1f} points"
        ci = f"95% CI [{diff.low * 100:+.1f}, {diff.high * 100:+.1f}]"
        if diff.includes_zero:
            return (f"pass@1 differs by {pct} ({ci}, {diff.tasks} tasks): the interval "
                    "includes zero, so this is no evidence that either is better")
        winner = self.a if diff.difference > 0 else self.b
        return f"{winner} is better: pass@1 higher by {pct} ({ci}, {diff.tasks} tasks)"

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "common_tasks": len(self.common),
                "only_in_a": list(self.only_a), "only_in_b": list(self.only_b),
                "pass@1_a": self.pass_a, "pass@1_b": self.pass_b,
                "pass@1_difference": self.pass_diff.to_json() if self.pass_diff else None,
                "mean_score_difference": self.score_diff.to_json() if self.score_diff
                else None,
                "better_in_a": list(self.better_in_a), "better_in_b": list(self.better_in_b),
                "errors_a": self.errors_a, "errors_b": self.errors_b,
                "seed": self.seed, "resamples": self.resamples, "statement": self.statement()}


def _rates(points: Sequence[RunPoint]) -> tuple[dict[str, float], dict[str, float]]:
    """Per task: the pass rate and the mean score of its completed runs."""
    per_task: dict[str, list[RunPoint]] = {}
    for point in points:
        if point.completed:
            per_task.setdefault(point.task_id, []).append(point)
    passes = {t: sum(p.passed for p in runs) / len(runs) for t, runs in per_task.items()}
    scores = {t: s for t, runs in per_task.items()
              if (s := _mean(p.score for p in runs)) is not None}
    return passes, scores


def bootstrap(pairs: Sequence[tuple[float, float]], *, seed: int = DEFAULT_SEED,
              resamples: int = DEFAULT_RESAMPLES) -> Interval | None:
    """The mean of ``a - b`` over ``pairs`` and its percentile interval from resampling the
    pairs with replacement (``random.Random(seed)``, so the same input gives the same
    interval everywhere)."""
    if not pairs:
        return None
    diffs = [a - b for a, b in pairs]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    tail = (1 - CONFIDENCE) / 2
    low = means[int(tail * resamples)]
    high = means[min(resamples - 1, int((1 - tail) * resamples))]
    return Interval(sum(diffs) / n, low, high, n)


def compare(a: str, points_a: Sequence[RunPoint], b: str, points_b: Sequence[RunPoint], *,
            seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES) -> Comparison:
    """A against B, paired by task."""
    pass_a, score_a = _rates(points_a)
    pass_b, score_b = _rates(points_b)
    common = tuple(sorted(set(pass_a) & set(pass_b)))
    return Comparison(
        a, b, common, tuple(sorted(set(pass_a) - set(pass_b))),
        tuple(sorted(set(pass_b) - set(pass_a))),
        _mean(pass_a[t] for t in common) if common else None,
        _mean(pass_b[t] for t in common) if common else None,
        bootstrap([(pass_a[t], pass_b[t]) for t in common], seed=seed, resamples=resamples),
        bootstrap([(score_a[t], score_b[t]) for t in common if t in score_a and t in score_b],
                  seed=seed, resamples=resamples),
        tuple(t for t in common if pass_a[t] > 0.5 >= pass_b[t]),
        tuple(t for t in common if pass_b[t] > 0.5 >= pass_a[t]),
        sum(1 for p in points_a if not p.completed),
        sum(1 for p in points_b if not p.completed), seed, resamples)


# -- rendering -------------------------------------------------------------------------------

BOARD_COLUMNS = ("agent", "model", "runs", "errors", "tasks", "pass@1", "pass@k", "mean_score",
                 "seconds_per_run", "tokens_per_run", "cost_per_run")


def board_cells(row: BoardRow) -> dict[str, str]:
    def num(value: float | None, digits: int = 2) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    return {"agent": row.agent, "model": row.model, "runs": str(row.runs),
            "errors": str(row.errors), "tasks": str(row.tasks), "pass@1": num(row.pass_at_1),
            "pass@k": num(row.pass_at_k), "mean_score": num(row.mean_score),
            "seconds_per_run": num(row.seconds_per_run, 1),
            "tokens_per_run": num(row.tokens_per_run, 0),
            "cost_per_run": num(row.cost_per_run, 4)}


def render_board(rows: Sequence[BoardRow], fmt: str, k: int) -> str:
    """The leaderboard as ``table``, ``csv``, ``md`` or ``json``."""
    import csv
    import io
    import json

    if fmt == "json":
        return json.dumps([r.to_json() for r in rows], indent=2)
    columns = [c for c in BOARD_COLUMNS if c != "pass@k" or k > 1]
    heads = [c if c != "pass@k" else f"pass@{k}" for c in columns]
    cells = [[board_cells(r)[c] for c in columns] for r in rows]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(heads)
        writer.writerows(cells)
        return out.getvalue().rstrip("\n")
    if fmt == "md":
        lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [[h.upper() for h in heads], *cells])
              for i in range(len(heads))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
                     for r in [[h.upper() for h in heads], *cells])


def render_comparison(result: Comparison, fmt: str) -> str:
    """A comparison as ``table`` (lines), ``md``, ``csv`` (one row per measure) or ``json``."""
    import json

    if fmt == "json":
        return json.dumps(result.to_json(), indent=2)

    def interval(name: str, value: Interval | None) -> list[str]:
        if value is None:
            return [name, "-", "-", "-", "0"]
        return [name, f"{value.difference:+.4f}", f"{value.low:+.4f}", f"{value.high:+.4f}",
                str(value.tasks)]

    rows = [interval("pass@1", result.pass_diff), interval("mean_score", result.score_diff)]
    head = ["measure", "difference (a - b)", "ci_low", "ci_high", "tasks"]
    if fmt == "csv":
        return "\n".join(",".join(r) for r in [head, *rows])
    if fmt == "md":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join([*lines, "", result.statement()])
    lines = [f"A: {result.a}   B: {result.b}",
             f"tasks in common: {len(result.common)}"
             + (f"; only in A: {', '.join(result.only_a)}" if result.only_a else "")
             + (f"; only in B: {', '.join(result.only_b)}" if result.only_b else "")]
    if result.common:
        lines.append(f"pass@1: A {result.pass_a:.3f}  B {result.pass_b:.3f}")
        for name, value in (("pass@1", result.pass_diff), ("mean score", result.score_diff)):
            if value is not None:
                lines.append(f"{name} A - B: {value.difference:+.3f}  95% CI "
                             f"[{value.low:+.3f}, {value.high:+.3f}]")
        lines.append(f"better in A: {', '.join(result.better_in_a) or 'none'}")
        lines.append(f"better in B: {', '.join(result.better_in_b) or 'none'}")
    if result.errors_a or result.errors_b:
        lines.append(f"infrastructure errors left out: A {result.errors_a}, B {result.errors_b}")
    lines.append(result.statement())
    lines.append(f"(bootstrap: {result.resamples} resamples of the tasks, seed {result.seed})")
    return "\n".join(lines)


def eval_groups(documents: Any, eval_id: str) -> list[Mapping[str, Any]]:
    """The stored run groups of eval ``eval_id``, newest first."""
    from agent_env.evals.groups import GROUPS

    return list(documents.query(GROUPS, {"kind": "eval", "subject_id": eval_id},
                                sort=[("_id", -1)]))

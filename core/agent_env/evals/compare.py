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
from agent_env.evals.report import mean_present
from agent_env.evals.stats import (
    STATS,
    TaskStats,
    count,
    group_version,
    run_summary,
    stats_from_document,
)

#: Resamples of the tasks behind each interval; the seed makes them repeatable.
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
CONFIDENCE = 0.95


#: (store, group) -> (version, counters): the last counters read, kept until the group changes
_CACHE: dict[tuple[str, str], tuple[int, list[TaskStats]]] = {}
_CACHE_SIZE = 64


def group_counters(documents: Any, group_id: str) -> list[TaskStats]:
    """The counters of run group ``group_id`` (counting a group made before they existed,
    once); :class:`~agent_env.errors.UserError` when there is no such group."""
    from agent_env.errors import UserError
    from agent_env.evals.groups import GROUPS, GroupStore

    if documents.count(GROUPS, {"_id": group_id, "counters": True}) == 0:
        if documents.count(GROUPS, {"_id": group_id}) == 0:
            raise UserError(f"no run group {group_id}")
        store = GroupStore(documents)
        backfill(documents, store.load(group_id))
        documents.update(GROUPS, {"_id": group_id}, {"$set": {"counters": True}})
    version = group_version(documents, group_id)
    # a store by where it keeps its data (a file), else by the object itself
    key = (str(getattr(documents, "path", None) or id(documents)), group_id)
    kept = _CACHE.get(key)
    if kept is not None and kept[0] == version:
        return kept[1]
    rows = [stats_from_document(doc) for doc in documents.query(STATS, {"group": group_id})]
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (version, rows)
    return rows


def backfill(documents: Any, group: Any) -> None:
    """Count the done slots of a group made before the counters existed (no summary on
    them)."""
    from agent_env.evals.groups import DONE
    from agent_env.tasks.records import StoredInstances

    slots = {s.index: s for s in group.slots}
    pending = documents.query(
        "eval_run_slots", {"group": group.group_id, "state": DONE, "summary": {"$exists": False}})
    if not pending:
        return
    instances = StoredInstances(documents)
    for doc in pending:
        slot = slots.get(int(doc["index"]))
        if slot is None:
            continue
        outcome = str(doc.get("outcome") or "")
        record = instances.get(str(doc["instance_id"])) if doc.get("instance_id") else None
        summary = run_summary(slot.task_id, slot.task_version, outcome, record)
        if documents.update("eval_run_slots", {"_id": doc["_id"],
                                               "summary": {"$exists": False}},
                            {"$set": {"summary": summary.to_json()}}):
            count(documents, group.group_id, summary)


@attrs.frozen
class _Totals:
    """Counters added up (several task versions, groups or pairs of one task)."""

    n: int = 0
    c: int = 0
    runs: int = 0
    errors: int = 0
    sums: Mapping[str, float] = attrs.field(factory=dict)
    counts: Mapping[str, int] = attrs.field(factory=dict)

    def plus(self, row: TaskStats) -> _Totals:
        names = set(self.sums) | set(row.sums)
        return _Totals(self.n + row.n, self.c + row.c, self.runs + row.runs,
                       self.errors + row.errors,
                       {k: self.sums.get(k, 0.0) + row.sums.get(k, 0.0) for k in names},
                       {k: self.counts.get(k, 0) + row.counts.get(k, 0) for k in names})

    def mean(self, name: str) -> float | None:
        counted = self.counts.get(name, 0)
        return self.sums.get(name, 0.0) / counted if counted else None


def _by_task(rows: Iterable[TaskStats]) -> dict[str, _Totals]:
    totals: dict[str, _Totals] = {}
    for row in rows:
        totals[row.task_id] = totals.get(row.task_id, _Totals()).plus(row)
    return totals


def _pass_at(tasks: Iterable[_Totals], k: int) -> tuple[float | None, int]:
    """pass@k: the unbiased estimate per task, averaged over the tasks with at least ``k``
    completed runs; and how many tasks that is."""
    estimates = [pass_at_k(v.n, v.c, k) for v in tasks if v.n >= k]
    return mean_present(estimates), len(estimates)


def pass_curve(rows: Sequence[TaskStats]) -> list[dict[str, Any]]:
    """pass@k for k from 1 to the most completed runs of a task (the plot of it)."""
    tasks = list(_by_task(rows).values())
    curve = []
    for k in range(1, max((v.n for v in tasks), default=0) + 1):
        value, counted = _pass_at(tasks, k)
        curve.append({"k": k, "value": value, "tasks": counted})
    return curve


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


def leaderboard(rows: Sequence[TaskStats], k: int = 1) -> list[BoardRow]:
    """One row per agent x model, best pass@1 first. pass@1 and pass@k are the unbiased
    estimates per task, averaged over the tasks with enough completed runs; the means are per
    completed run."""
    by_pair: dict[tuple[str, str], list[TaskStats]] = {}
    for row in rows:
        by_pair.setdefault((row.agent, row.model), []).append(row)
    board = []
    for (agent, model), mine in by_pair.items():
        tasks = {t: v for t, v in _by_task(mine).items() if v.n}
        total = _Totals()
        for row in mine:
            total = total.plus(row)
        board.append(BoardRow(
            agent, model, total.n, total.errors, len(tasks), k,
            _pass_at(tasks.values(), 1)[0], _pass_at(tasks.values(), k)[0],
            total.mean("score"), total.mean("seconds"), total.mean("tokens"),
            total.mean("cost_usd"), tuple(sorted({r.group_id for r in mine}))))
    return sorted(board, key=lambda r: (-(r.pass_at_1 or 0.0), r.agent, r.model))


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


def _rates(rows: Sequence[TaskStats]) -> tuple[dict[str, float], dict[str, float]]:
    """Per task: the pass rate and the mean score of its completed runs."""
    tasks = {t: v for t, v in _by_task(rows).items() if v.n}
    passes = {t: v.c / v.n for t, v in tasks.items()}
    scores = {t: s for t, v in tasks.items() if (s := v.mean("score")) is not None}
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


def compare(a: str, rows_a: Sequence[TaskStats], b: str, rows_b: Sequence[TaskStats], *,
            seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES) -> Comparison:
    """A against B, paired by task."""
    pass_a, score_a = _rates(rows_a)
    pass_b, score_b = _rates(rows_b)
    common = tuple(sorted(set(pass_a) & set(pass_b)))
    return Comparison(
        a, b, common, tuple(sorted(set(pass_a) - set(pass_b))),
        tuple(sorted(set(pass_b) - set(pass_a))),
        mean_present(pass_a[t] for t in common) if common else None,
        mean_present(pass_b[t] for t in common) if common else None,
        bootstrap([(pass_a[t], pass_b[t]) for t in common], seed=seed, resamples=resamples),
        bootstrap([(score_a[t], score_b[t]) for t in common if t in score_a and t in score_b],
                  seed=seed, resamples=resamples),
        tuple(t for t in common if pass_a[t] > 0.5 >= pass_b[t]),
        tuple(t for t in common if pass_b[t] > 0.5 >= pass_a[t]),
        sum(r.errors for r in rows_a), sum(r.errors for r in rows_b), seed, resamples)


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

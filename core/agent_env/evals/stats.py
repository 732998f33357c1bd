"""A run group's numbers, kept as they are made: one counter document per task x agent x model.

Why: the leaderboard, the comparisons and the plots need, per task and agent x model, how many
runs completed, how many passed, their score, time, tokens and cost. Reading every run's record
to get them costs seconds at 50,000 runs; counters incremented as each slot finishes
(:meth:`~agent_env.evals.groups.GroupStore.finish`) cost one small document per task and pair
to read, whatever the run count. Distributions are kept as bucket counts (scores in tenths;
time, tokens and cost in roughly-tripling buckets), which is what a plot of 50,000 runs can show
anyway.

A slot finished again (an errored run retried by ``--resume``) first takes its earlier summary
back out. This module writes and decodes the counters; :mod:`agent_env.evals.compare` reads
them for a group (and counts a group made before they existed).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agent_env.tasks.scores import COMPLETED, FAILED, PASSED

STATS = "eval_run_stats"
#: One small document per group: ``version`` goes up with every count, so a reader can keep
#: what it computed until the group changes (what makes a finished group of 50,000 runs cheap
#: to show again).
VERSIONS = "eval_run_stats_versions"
#: Upper bucket edges (a value goes to the first edge it is below; the last bucket is open).
SECONDS_EDGES = (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000)
TOKENS_EDGES = (100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
COST_EDGES = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3)
EDGES = {"seconds": SECONDS_EDGES, "tokens": TOKENS_EDGES, "cost_usd": COST_EDGES}


@attrs.frozen
class RunSummary:
    """What one finished run adds to its group's counters (kept on its slot document)."""

    task_id: str
    task_version: int
    outcome: str
    agent: str = "-"
    model: str = "-"
    score: float | None = None
    seconds: float | None = None
    tokens: float | None = None
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        import cattrs

        return cattrs.structure(dict(data), cls)


def model_usage(record: Any) -> dict[str, float]:
    """Summed ``usage`` of the run's prompt steps (tokens, tool calls), from its record."""
    total: dict[str, float] = {}
    outputs = (record.context.get("outputs") or {}) if record is not None else {}
    for output in outputs.values():
        usage = output.get("usage") if isinstance(output, dict) else None
        for key, value in (usage or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
    return total


def run_summary(task_id: str, task_version: int, outcome: str, record: Any) -> RunSummary:
    """A run's summary from its instance record (None: the record could not be read)."""
    scores = dict(record.scores) if record is not None else {}
    score = (sum(scores.values()) / len(scores) if scores
             else 0.0 if outcome == FAILED else None)
    usage = model_usage(record)
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0) if usage else None
    return RunSummary(task_id, task_version, outcome,
                      (record.agents if record is not None else None) or "-",
                      (record.models if record is not None else None) or "-", score,
                      record.duration_seconds if record is not None else None, tokens,
                      usage.get("cost_usd") if usage else None)


def _key(group_id: str, summary: RunSummary) -> str:
    return (f"{group_id}#{summary.task_id}@{summary.task_version}#{summary.agent}"
            f"#{summary.model}")


def _increments(summary: RunSummary, sign: int) -> dict[str, float]:
    done = summary.outcome in COMPLETED
    inc: dict[str, float] = {"runs": sign}
    if not done:
        inc["errors"] = sign
        return inc
    inc["n"] = sign
    if summary.outcome == PASSED:
        inc["c"] = sign
    if summary.score is not None:
        inc["score_sum"] = sign * summary.score
        inc["score_n"] = sign
        inc[f"hist.score.b{min(10, max(0, round(summary.score * 10)))}"] = sign
    for name, edges in EDGES.items():
        value = getattr(summary, name)
        if value is None:
            continue
        inc[f"{name}_sum"] = sign * float(value)
        inc[f"{name}_n"] = sign
        inc[f"hist.{name}.b{bisect.bisect_right(edges, float(value))}"] = sign
    return inc


def count(documents: Any, group_id: str, summary: RunSummary, sign: int = 1) -> None:
    """Add (``sign`` 1) or take back (-1) one run's summary in its counter document."""
    key = _key(group_id, summary)
    _increment(documents, STATS, key, _increments(summary, sign), {
        "group": group_id, "task_id": summary.task_id, "task_version": summary.task_version,
        "agent": summary.agent, "model": summary.model, "runs": 0, "n": 0, "c": 0,
        "errors": 0})
    _increment(documents, VERSIONS, group_id, {"version": 1}, {"version": 0})


def _increment(documents: Any, collection: str, key: str, inc: Mapping[str, float],
               fresh: Mapping[str, Any]) -> None:
    """``$inc`` the document ``key``, made from ``fresh`` first when it is not there yet."""
    from agent_env.stores.base import DuplicateKeyError

    for _ in range(5):
        if documents.update(collection, {"_id": key}, {"$inc": dict(inc)}):
            return
        try:
            documents.insert(collection, {"_id": key, **fresh})
        except DuplicateKeyError:  # another process made it first: increment it
            continue


def group_version(documents: Any, group_id: str) -> int:
    """How many times the group's counters changed (0: never)."""
    found = documents.find_one(VERSIONS, {"_id": group_id})
    return int((found or {}).get("version") or 0)




@attrs.frozen
class TaskStats:
    """One task x agent x model of a group: the counters read back."""

    group_id: str
    task_id: str
    task_version: int
    agent: str
    model: str
    runs: int
    n: int
    c: int
    errors: int
    sums: Mapping[str, float]
    counts: Mapping[str, int]
    hist: Mapping[str, Mapping[str, int]]

    def mean(self, name: str) -> float | None:
        counted = self.counts.get(name, 0)
        return self.sums.get(name, 0.0) / counted if counted else None


def stats_from_document(doc: Mapping[str, Any]) -> TaskStats:
    """A counter document read back."""
    names = ("score", *EDGES)
    return TaskStats(
        str(doc["group"]), str(doc["task_id"]), int(doc.get("task_version") or 0),
        str(doc.get("agent") or "-"), str(doc.get("model") or "-"), int(doc.get("runs") or 0),
        int(doc.get("n") or 0), int(doc.get("c") or 0), int(doc.get("errors") or 0),
        {name: float(doc.get(f"{name}_sum") or 0.0) for name in names},
        {name: int(doc.get(f"{name}_n") or 0) for name in names},
        {name: {str(k): int(v) for k, v in (doc.get("hist") or {}).get(name, {}).items()}
         for name in names})


def buckets(name: str) -> list[str]:
    """The labels of ``name``'s buckets, in order (``< 0.1``, ``0.1-0.3``, ..., ``>= 3000``)."""
    if name == "score":
        return [f"{i / 10:.1f}" for i in range(11)]
    edges = EDGES[name]
    labels = [f"< {edges[0]:g}"]
    labels += [f"{low:g}-{high:g}" for low, high in itertools.pairwise(edges)]
    return [*labels, f">= {edges[-1]:g}"]


def merged_hist(rows: Sequence[TaskStats], name: str) -> list[int]:
    """The bucket counts of ``name`` over ``rows``."""
    size = len(buckets(name))
    total = [0] * size
    for row in rows:
        for key, value in row.hist.get(name, {}).items():  # bucket i is stored as "b<i>"
            if key[1:].isdigit() and int(key[1:]) < size:
                total[int(key[1:])] += value
    return total

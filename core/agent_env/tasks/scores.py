"""Scores: result rows, the three aggregators, reported scores and a run's outcome.

A verifier step writes one :class:`Verification` under its ``verifier_id``; the run reports
``{step_id: score}`` and an outcome (:func:`outcome`: cancelled, else error, else failed, else
unscored when no verifier scored, else passed when every score is 1, else scored below 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

PASSED = "passed"
FAILED = "failed"
CANCELLED = "cancelled"
#: infrastructure failed the run (beyond the reference, which scores such a run as failed)
ERROR = "error"
UNSCORED = "unscored"
SCORED_BELOW_1 = "scored below 1"
#: outcomes of a run that completed: its result stands (a resumed eval reuses it)
COMPLETED = frozenset({PASSED, FAILED, SCORED_BELOW_1, UNSCORED})
#: outcomes a command reports as success (exit 0)
SUCCESS = frozenset({PASSED, UNSCORED})


@attrs.frozen
class ScoreRow:
    """One criterion's result: the criterion's own keys plus what the verifier decided."""

    criterion_index: int
    score: float
    result: bool
    justification: str = ""
    skipped: bool = False
    weight: float = 1.0
    criterion: dict[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.criterion,
            "criterion_index": self.criterion_index,
            "score": self.score,
            "result": self.result,
            "justification": self.justification,
            "skipped": self.skipped,
        }


def _rows(items: Iterable[ScoreRow]) -> tuple[ScoreRow, ...]:
    """``converter=tuple`` with a type mypy can check (see :mod:`agent_env._tuples`)."""
    return tuple(items)


@attrs.frozen
class Verification:
    """What one verifier decided: the aggregate score and its rows."""

    verifier_id: str
    step_id: str
    score: float
    results: tuple[ScoreRow, ...] = attrs.field(converter=_rows, factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"score": self.score, "step_id": self.step_id,
                "results": [row.to_json() for row in self.results]}


def _counted(rows: Iterable[ScoreRow]) -> list[ScoreRow]:
    return [row for row in rows if not row.skipped]


def all_pass(rows: Sequence[ScoreRow]) -> float:
    counted = _counted(rows)
    return 1.0 if counted and all(row.score >= 1 for row in counted) else 0.0


def any_pass(rows: Sequence[ScoreRow]) -> float:
    return 1.0 if any(row.score >= 1 for row in _counted(rows)) else 0.0


def weighted_average(rows: Sequence[ScoreRow]) -> float:
    """Σ score·w over positive weights, minus (1 - score)·|w| for negative ones, clamped."""
    counted = _counted(rows)
    positive = sum(row.weight for row in counted if row.weight > 0)
    if positive <= 0:
        return 0.0
    gained = sum(row.score * row.weight for row in counted if row.weight > 0)
    lost = sum((1 - row.score) * -row.weight for row in counted if row.weight < 0)
    return min(1.0, max(0.0, (gained - lost) / positive))


AGGREGATORS: dict[str, Callable[[Sequence[ScoreRow]], float]] = {
    "all_pass": all_pass,
    "any_pass": any_pass,
    "weighted_average": weighted_average,
}


def rows_from_results(result: Any, what: str) -> list[ScoreRow]:
    """Score rows from results as verify scripts and steps written for the reference framework
    give them: ``[{id, result, description}]`` (optional ``score``, ``weight``; one row may be
    a lone object). ``what`` names the source in the ValueError a malformed result raises."""
    if isinstance(result, dict):
        result = [result]
    if not isinstance(result, list):
        raise ValueError(f"{what} must give a list of rows ({{id, result, description}}), not "
                         f"{type(result).__name__}")
    rows = []
    for index, raw in enumerate(result):
        if not isinstance(raw, dict) or "result" not in raw:
            raise ValueError(f"{what}: row {index} must be an object with 'id', 'result' and "
                             f"'description', not {raw!r}")
        passed = bool(raw["result"])
        score = raw.get("score", 1.0 if passed else 0.0)
        criterion = {k: v for k, v in raw.items()
                     if k not in ("result", "description", "score", "weight")}
        rows.append(ScoreRow(index, float(score), passed, str(raw.get("description") or ""),
                             weight=float(raw.get("weight", 1.0)), criterion=criterion))
    return rows


def aggregate(name: str, rows: Sequence[ScoreRow]) -> float:
    """Score ``rows`` with the named aggregator; no rows score 0."""
    if not rows:
        return 0.0
    try:
        return AGGREGATORS[name](rows)
    except KeyError:
        known = ", ".join(AGGREGATORS)
        raise ValueError(f"'{name}' is not a score aggregator (known: {known})") from None


def reported_scores(verifications: Mapping[str, Verification]) -> dict[str, float]:
    """``{step_id: score}``: each verifier id mapped back to the step that wrote it."""
    return {v.step_id: v.score for v in verifications.values()}


def mean_score(scores: Mapping[str, float]) -> float | None:
    """A run's score: the mean of its reported scores (None when it reported none). What an
    eval's table averages and what an episode's trainer gets as its reward by default."""
    return sum(scores.values()) / len(scores) if scores else None


def outcome(*, cancelled: bool, failed: bool, scores: Mapping[str, float],
            errored: bool = False) -> str:
    """cancelled > error (infrastructure) > failed > unscored > passed > scored below 1."""
    if cancelled:
        return CANCELLED
    if errored:
        return ERROR
    if failed:
        return FAILED
    if not scores:
        return UNSCORED
    if all(score >= 1 for score in scores.values()):
        return PASSED
    return SCORED_BELOW_1


def format_score(score: float) -> str:
    """``1``, ``0``, ``0.5``, ``0.67``: as short as the value allows."""
    return f"{round(score, 2):g}"


def format_scores(scores: Mapping[str, float]) -> str:
    return ", ".join(f"{name}: {format_score(value)}" for name, value in scores.items())

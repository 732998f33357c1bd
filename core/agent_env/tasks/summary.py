"""How a set of finished runs reads: a line per run, the count line, and the JSON of each.

One place for the words, so ``agent-env run``, ``task run`` and a group's table (``eval run``)
say the same thing about the same outcome, and ``--json`` carries the same counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_env.plural import plural

if TYPE_CHECKING:
    from agent_env.tasks.engine import TaskResult


#: How the count line names each outcome, in the order it lists them.
OUTCOME_WORDS = (("passed", "passed"), ("unscored", "unscored"),
                 ("scored below 1", "scored below 1"), ("failed", "failed"),
                 ("error", "infrastructure error (not scored)"), ("cancelled", "cancelled"))


def task_line(result: TaskResult) -> str:
    version = f" v{result.task.version}" if result.task.version else ""
    return (f"  {result.task.label}{version}: {result.describe()}, "
            f"{result.duration_seconds:.1f}s, instance {result.instance_id}")


#: How many of a run's failing rows its summary quotes, and how much of each.
SAID_ROWS, SAID_CHARS = 3, 240


def verifier_said(result: TaskResult, *, failing: bool = True) -> list[str]:
    """What the run's verifiers said of the rows that failed (``failing=False``: of those that
    scored above 0), in their own words, and why an agent failed a prompt, from its record."""
    from agent_env.runtime import current
    from agent_env.tasks.records import StoredInstances

    record = StoredInstances(current().document_store).get(result.instance_id)
    context = record.context if record is not None else {}
    verifications = (context.get("metadata") or {}).get("verifications") or {}
    said = [f"{row.get('id', '?')}: {str(row.get('justification') or '').strip()}"
            for verification in verifications.values() if isinstance(verification, dict)
            for row in verification.get("results") or []
            if isinstance(row, dict) and str(row.get("justification") or "").strip()
            and (not row.get("result") if failing else float(row.get("score") or 0) > 0)]
    said += [f"the agent: {out['error_message']}"
             for out in (context.get("outputs") or {}).values()
             if isinstance(out, dict) and out.get("error_message")]
    return [line if len(line) <= SAID_CHARS else line[:SAID_CHARS - 3] + "..."
            for line in said[:SAID_ROWS]]


def why_lines(result: TaskResult) -> list[str]:
    """Under a run that scored below 1, its verifiers' words (a run that failed or erred
    says why on its own line already)."""
    from agent_env.tasks import scores

    if result.outcome != scores.SCORED_BELOW_1:
        return []
    return [f"      {line}" for line in verifier_said(result)]


def is_success(result: TaskResult) -> bool:
    from agent_env.tasks import scores

    return result.outcome in scores.SUCCESS


def count_line(results: Sequence[TaskResult]) -> str:
    """``3 runs: 1 passed, 1 failed, 1 infrastructure error (not scored)``: an error is counted
    apart from a failure, so an outage never reads as an agent that scored 0."""
    parts = []
    for outcome, words in OUTCOME_WORDS:
        count = sum(1 for r in results if r.outcome == outcome)
        if count:
            parts.append(f"{count} {words}")
    return f"{plural(len(results), 'run')}: {', '.join(parts)}"


def run_json(result: TaskResult) -> dict[str, Any]:
    """One run as ``--json`` prints it."""
    from agent_env.tasks import scores

    fatal = result.first_fatal
    ended_badly = fatal is not None and result.outcome in (scores.FAILED, scores.ERROR)
    return {
        "task": result.task.label, "task_id": result.task.id, "version": result.task.version,
        "instance_id": result.instance_id, "outcome": result.outcome,
        "error_kind": ("infra" if result.outcome == scores.ERROR else "task"
                       if result.outcome == scores.FAILED else None),
        "error": fatal.summary if ended_badly and fatal is not None else None,
        "failed_step": fatal.step_id if ended_badly and fatal is not None else None,
        "scores": dict(result.scores), "duration_seconds": round(result.duration_seconds, 3),
        "verifier_said": (verifier_said(result) if result.outcome == scores.SCORED_BELOW_1
                          else []),
    }


def summary_json(results: Sequence[TaskResult]) -> dict[str, Any]:
    counts = {outcome: sum(1 for r in results if r.outcome == outcome)
              for outcome, _ in OUTCOME_WORDS}
    return {"runs": len(results), **{k.replace(" ", "_"): v for k, v in counts.items()},
            "errors": counts["error"]}

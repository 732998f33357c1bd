"""``eval report``: the leaderboard of an eval's stored runs (one row per agent x model) and two
run groups compared task by task with a seeded bootstrap interval. The runs are written to the
real document store as an eval run writes them (group, slots, instance records)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_runner import cli

from agent_env.evals.compare import bootstrap, compare, leaderboard
from agent_env.evals.stats import TaskStats


def store_group(group_id: str, runs: list[tuple[str, str, float | None, str, str]],
                k: int = 1, eval_id: str = "suite") -> None:
    """A finished eval run group: (task, outcome, score, agent, model) per run."""
    from agent_env.evals.groups import Group, GroupStore, Slot
    from agent_env.runtime import current
    from agent_env.tasks.records import InstanceRecord, StoredInstances

    documents = current().document_store
    slots = tuple(Slot(i, task, 1, 1) for i, (task, *_rest) in enumerate(runs))
    group = Group(group_id, "eval", eval_id, 1, k, slots)
    store = GroupStore(documents)
    store.create(group)
    for slot, (task, outcome, score, agent, model) in zip(slots, runs, strict=True):
        instance = f"{group_id}-{slot.index}"
        record = InstanceRecord(
            instance, task, 1, "completed", "2026-12-06T00:00:00+00:00",
            "2026-12-06T00:00:05+00:00", outcome, {} if score is None else {"v": score},
            duration_seconds=5.0 + slot.index,
            context={"agents": {"agent": {"agent": agent, "model": model}},
                     "outputs": {"ask": {"usage": {"input_tokens": 100, "output_tokens": 20,
                                                   "cost_usd": 0.01}}}})
        StoredInstances(documents).save(record)
        assert store.claim(group, slot).state == "mine"
        store.finish(group, slot, instance, outcome, [instance])


def stats(task: str, passed: int, failed: int, errors: int = 0, model: str = "m") -> TaskStats:
    """A task's counters: ``passed`` runs scoring 1, ``failed`` scoring 0."""
    n = passed + failed
    return TaskStats("g", task, 1, "model-agent", model, n + errors, n, passed, errors,
                     {"score": float(passed)}, {"score": n}, {})


def test_the_bootstrap_is_repeatable_and_its_interval_holds_the_difference() -> None:
    pairs = [(1.0, 0.0)] * 6 + [(0.0, 0.0)] * 4
    first = bootstrap(pairs, seed=7, resamples=2000)
    assert first == bootstrap(pairs, seed=7, resamples=2000)
    assert first is not None and first.difference == 0.6
    assert 0 < first.low <= 0.6 <= first.high <= 1.0 and not first.includes_zero
    assert bootstrap([(1.0, 1.0), (0.0, 0.0)], resamples=500).includes_zero  # type: ignore[union-attr]
    assert bootstrap([]) is None


def test_a_comparison_pairs_by_task_leaves_errors_out_and_says_what_it_means() -> None:
    a = [stats("t1", 1, 0), stats("t2", 1, 0), stats("t3", 0, 1), stats("t4", 0, 0, errors=1),
         stats("only-a", 1, 0)]
    b = [stats("t1", 0, 1), stats("t2", 1, 0), stats("t3", 1, 0), stats("t4", 1, 0),
         stats("only-b", 0, 1)]
    result = compare("A", a, "B", b, resamples=1000)
    assert result.common == ("t1", "t2", "t3")  # t4 errored in A: not a completed run
    assert (result.only_a, result.only_b) == (("only-a",), ("only-b", "t4"))
    assert result.better_in_a == ("t1",) and result.better_in_b == ("t3",)
    assert result.errors_a == 1 and result.pass_diff is not None
    assert result.pass_diff.difference == 0.0 and result.pass_diff.includes_zero
    assert "the interval includes zero, so this is no evidence that either is better" in \
        result.statement()
    nothing = compare("A", [stats("x", 1, 0)], "B", [stats("y", 1, 0)])
    assert nothing.statement() == ("A and B have no task in common (with a completed run): "
                                   "there is nothing to compare")


def test_the_leaderboard_has_a_row_per_agent_and_model() -> None:
    rows = [stats("t1", 1, 1, errors=1, model="m1"), stats("t1", 2, 0, model="m2")]
    best, other = leaderboard(rows, k=2)
    assert (best.model, best.pass_at_1, best.pass_at_k, best.runs) == ("m2", 1.0, 1.0, 2)
    assert (other.model, other.pass_at_1, other.pass_at_k, other.errors) == ("m1", 0.5, 1.0, 1)


def test_eval_report_prints_the_leaderboard_and_a_comparison(state_root: Path,
                                                             capsys: Any) -> None:
    tasks = [f"t{i:02d}" for i in range(12)]
    store_group("evalrun-strong", [(t, "passed", 1.0, "model-agent", "big") for t in tasks])
    store_group("evalrun-weak", [(t, "passed" if i < 3 else "failed", 1.0 if i < 3 else 0.0,
                                  "model-agent", "small") for i, t in enumerate(tasks)])
    code, out, err = cli(capsys, "eval", "report", "--id", "suite", "--format", "csv")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0] == ("agent,model,runs,errors,tasks,pass@1,mean_score,"
                        "seconds_per_run,tokens_per_run,cost_per_run")
    assert lines[1] == "model-agent,big,12,0,12,1.00,1.00,10.5,120,0.0100"
    assert lines[2].startswith("model-agent,small,12,0,12,0.25,0.25,")
    code, out, err = cli(capsys, "eval", "report", "--id", "suite", "--format", "json")
    assert [row["model"] for row in json.loads(out)] == ["big", "small"]
    code, out, err = cli(capsys, "eval", "report", "--compare", "evalrun-strong",
                         "evalrun-weak", "--format", "json", "--seed", "3")
    assert code == 0, err
    result = json.loads(out)
    assert result["common_tasks"] == 12
    assert result["pass@1_difference"]["difference"] == 0.75
    assert result["pass@1_difference"]["includes_zero"] is False
    assert result["better_in_a"] == tasks[3:] and result["better_in_b"] == []
    assert result["statement"].startswith("evalrun-strong is better: pass@1 higher by 75.0 "
                                          "points (95% CI [+")
    again = json.loads(cli(capsys, "eval", "report", "--compare", "evalrun-strong",
                           "evalrun-weak", "--format", "json", "--seed", "3")[1])
    assert again == result  # seeded: the same numbers every time
    code, out, err = cli(capsys, "eval", "report", "--compare", "evalrun-strong",
                         "evalrun-weak")
    assert "pass@1 A - B: +0.750  95% CI [" in out
    assert "better in A: t03, t04, t05" in out


def test_bad_report_requests_are_one_line_errors(state_root: Path, capsys: Any) -> None:
    cases = {("--id", "nothing"): "Error: eval nothing has no stored runs",
             ("--compare", "evalrun-x", "evalrun-y"): "Error: no run group evalrun-x",
             ("--compare", "a", "a"): "Error: --compare a a: compare two different run groups",
             (): "give --id EVAL (a leaderboard) or --compare A B"}
    for args, expected in cases.items():
        code, _, err = cli(capsys, "eval", "report", *args)
        assert code != 0 and expected in err, (args, err)

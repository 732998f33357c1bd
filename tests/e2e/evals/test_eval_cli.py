"""``agent-env eval`` and ``task run --k`` / ``run-batch`` as users run them (local sandboxes)."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

HELLO = Path(__file__).resolve().parents[3] / "core/agent_env/bundles/shipped/hello"
GREETING = "@local/agentenv-framework/hello/greeting"


def hello_steps(check: str = "bash check.sh") -> list[dict[str, Any]]:
    steps = json.loads((HELLO / "tasks/hello.json").read_text())
    steps[1]["artifact_id"] = GREETING
    steps[2]["criteria"][1]["bash_cmd"] = check
    return steps


def store_task(agent_env, task_id: str, steps: list[dict[str, Any]]) -> None:
    path = agent_env.root / f"{task_id}.json"
    path.write_text(json.dumps(steps))
    created = agent_env("task", "create", str(path), "--id", task_id)
    assert created.returncode == 0, created.stderr


@pytest.fixture
def stored(agent_env):
    """The hello artifact stored, a task that passes and one that scores 0."""
    assert agent_env("run", "hello").returncode == 0
    store_task(agent_env, "greets", hello_steps())
    store_task(agent_env, "never", hello_steps("false"))
    (agent_env.root / "smoke.json").write_text(json.dumps({"tasks": ["greets", "never"]}))
    assert agent_env("eval", "create", "smoke.json", "--id", "smoke").stdout == \
        "eval smoke: v1 (new)\n"
    return agent_env


def test_eval_run_k5_prints_pass_at_k_and_writes_results(stored) -> None:
    out = stored.root / "out"
    result = stored("eval", "run", "--id", "smoke", "--k", "5", "--output-dir", str(out))
    assert result.returncode == 0, result.stdout + result.stderr  # every run completed
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"Run group (evalrun-[a-z0-9]{8}): eval smoke v1, 10 runs \(resume: "
                        r"agent-env eval run --id smoke --resume \1\)", lines[0])
    start = lines.index("Results:")
    assert [line.split() for line in lines[start + 2:start + 4]] == [
        ["greets", "v1", "5", "5", "0", "0", "1.00", "1.00", "1.00"],
        ["never", "v1", "5", "0", "5", "0", "0.00", "0.00", "0.00"]]
    assert lines[start + 4] == "Means over 2 tasks: mean score 0.50, pass@1 0.50, pass@5 0.50"
    assert "10 runs: 5 passed, 5 scored below 1" in result.stdout
    assert "Tore down 10 sandboxes." in result.stdout
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and {r["instance_id"] for r in rows} == {
        r["instance_id"] for r in rows}
    assert sorted((r["task_id"], r["sample"]) for r in rows) == [
        (t, s) for t in ("greets", "never") for s in range(1, 6)]
    first = rows[0]
    assert first["scores"] == {"hello": 1.0} and first["passed"] is True
    assert first["started_at_utc"] and first["model_usage"] == {} and first["attempts"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["means"] == {"mean_score": 0.5, "pass@1": 0.5, "pass@5": 0.5}
    assert summary["counts"]["passed"] == 5 and summary["exit_code"] == 0
    # every slot is finished in the store: a resume reuses all ten and runs nothing
    group = lines[0].split()[2].rstrip(":")
    # each run's record names its group and eval (the explorer's eval and run_group filters)
    record = json.loads(stored("task", "get-instance", first["instance_id"]).stdout)
    assert record["context"]["metadata"]["run_group_id"] == group
    assert record["context"]["metadata"]["eval_id"] == "smoke"
    again = stored("eval", "run", "--id", "smoke", "--resume", group, "--json")
    assert again.returncode == 0, again.stderr
    document = json.loads(again.stdout)
    assert [r["reused"] for r in document["runs"]] == [True] * 10
    assert document["tasks"][0]["pass@5"] == 1.0


def test_task_run_k_and_run_batch_by_seed(stored) -> None:
    ran = stored("task", "run", "--id", "greets", "--k", "3")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "PASS@3" in ran.stdout and "3 runs: 3 passed" in ran.stdout
    store_task(stored, "seeded", hello_steps("test <seed> -ne 2"))
    batch = stored("task", "run-batch", "--id", "seeded", "--seeds", "1,2,3",
                   "--concurrency", "2", "--json")
    assert batch.returncode == 0, batch.stderr
    document = json.loads(batch.stdout)
    assert {r["seed"]["seed"]: r["outcome"] for r in document["runs"]} == {
        "1": "passed", "2": "scored below 1", "3": "passed"}
    assert document["kind"] == "batch" and document["tasks"][0]["passed"] == 2


BAD_INPUT = [
    (("eval", "run", "--id", "smoke", "--k", "0"), "Error: --k 0: give at least 1 run per task"),
    (("eval", "run", "--id", "nope"),
     "Error: no eval 'nope' is stored (agent-env eval create FILE --id nope stores one)"),
    (("eval", "run", "--id", "smoke", "--resume", "evalrun-nothing1"),
     "Error: --resume evalrun-nothing1: no such run group (eval run prints the id when it "
     "starts)"),
    (("task", "run-batch", "--id", "greets", "--seeds", "1,2,1"),
     "Error: --seeds 1,2,1: 1 is listed twice"),
    (("task", "run-batch", "--id", "greets", "--seeds", "1,x"),
     "Error: --seeds 1,x: 'x' is not an integer (give e.g. 1,2,3)"),
    (("eval", "run", "--id", "smoke", "--max-concurrency", "0"),
     "Error: --max-concurrency 0: give at least 1 run at a time"),
    (("task", "run-batch", "--id", "greets", "--seeds", "1", "--concurrency", "0"),
     "Error: --concurrency 0: give at least 1 run at a time"),
    (("eval", "run", "--id", "smoke", "--retries", "-1"), "Error: --retries -1: give 0 to 100"),
    (("eval", "run", "--id", "smoke", "--model", "nobody:x"),
     "Error: --model: model provider 'nobody' is not known, and no upstream is configured: set "
     "[model] base_url (and api_key) in .agentenv/config.toml or AGENT_ENV_MODEL_BASE_URL, or "
     "use a model a plugin serves (scripted:<name>)"),
    (("task", "run", "--id", "greets", "--k", "0"), "Error: --k 0: give at least 1 run per task"),
    (("eval", "get", "--id", "smoke", "--version", "9"),
     "Error: no eval 'smoke' version 9 is stored (agent-env eval create FILE --id smoke stores "
     "one)"),
]


def test_bad_input_is_one_line(stored, monkeypatch) -> None:
    for args, message in BAD_INPUT:  # one stored set-up for all (each costs 5 CLI starts)
        result = stored(*args)
        assert result.returncode == 1 and result.stderr.strip() == message, result.stderr
    # nothing was run or recorded: no run group, no instance beyond the set-up's one
    from agent_env import runtime
    from agent_env.runtime import current

    monkeypatch.setenv("AGENT_ENV_STATE_DIR", str(stored.state))
    runtime.reset()
    try:
        documents = current().document_store
        assert documents.count("eval_run_groups") == 0
        assert documents.count("task_instances") == 1  # agent-env run hello
    finally:
        monkeypatch.undo()
        runtime.reset()


def test_an_eval_naming_a_missing_task_writes_nothing(stored) -> None:
    (stored.root / "bad.json").write_text(json.dumps(
        ["greets", {"task_id": "greets", "task_version": 4}, "ghost"]))
    result = stored("eval", "add-tasks", "bad.json", "--id", "smoke")
    assert result.returncode == 1
    assert result.stderr.strip() == ("Error: 2 tasks are not stored: greets v4, ghost "
                                     "(agent-env task create FILE --id ID stores one); nothing "
                                     "was written")
    assert json.loads(stored("eval", "get", "--id", "smoke").stdout)["version"] == 1
    (stored.root / "more.json").write_text(json.dumps([{"task_id": "greets",
                                                        "task_version": 1}]))
    added = stored("eval", "add-tasks", "more.json", "--id", "smoke")
    assert added.stdout.strip() == "eval smoke: v2 (tasks added: greets v1)"


def test_ctrl_c_mid_eval_then_resume_runs_exactly_the_missing_runs(stored) -> None:
    store_task(stored, "slow", hello_steps("sleep 0.6"))
    (stored.root / "slow.json").write_text(json.dumps(["slow"]))
    assert stored("eval", "create", "slow.json", "--id", "slow").returncode == 0
    process = stored.start("eval", "run", "--id", "slow", "--k", "6", "--max-concurrency", "2")
    assert process.stdout is not None
    seen = []
    deadline = time.monotonic() + 60
    while len([s for s in seen if "passed" in s]) < 2 and time.monotonic() < deadline:
        seen.append(process.stdout.readline())
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    out = "".join(seen) + out
    assert process.returncode == 130, out + err
    done = int(re.search(r"Interrupted: (\d+) of 6 runs done; resume with: agent-env eval run "
                         r"--id slow --resume (evalrun-\w+)", err).group(1))
    group = re.search(r"--resume (evalrun-\w+)", err).group(1)
    assert 2 <= done < 6
    # two processes resume the group at once: between them, each missing run is made once
    both = [stored.start("eval", "run", "--id", "slow", "--resume", group, "--json")
            for _ in range(2)]
    outputs = [p.communicate(timeout=60) for p in both]
    assert [p.returncode for p in both] == [0, 0], outputs
    reports = [json.loads(out)["runs"] for out, _ in outputs]
    for runs in reports:  # each reports the whole group, waiting for the other's runs
        assert sorted(r["sample"] for r in runs) == [1, 2, 3, 4, 5, 6]
        assert all(r["outcome"] == "passed" for r in runs)
    made = [r["instance_id"] for runs in reports for r in runs if not r["reused"]]
    assert len(made) == len(set(made)) == 6 - done


def test_the_reference_export_is_accepted_and_task_get_round_trips(stored) -> None:
    steps = hello_steps()
    exported = {"id": "ref-task", "version": 3, "steps": [
        {**steps[0], "depends_on": None, "retry_config": None, "fail_task_on_error": True},
        {**steps[1], "depends_on": [{"task_step_id": "box"}], "retry_config": None},
        {**steps[2], "depends_on": [{"task_step_id": "load"}], "shell_timeout_seconds": None},
    ], "created_at_utc": "2026-01-01T00:00:00Z", "reason": None}
    (stored.root / "export.json").write_text(json.dumps(exported))
    created = stored("task", "create", "export.json", "--id", "ref-task")
    assert created.stdout.strip() == "task ref-task: v1 (new)", created.stderr
    got = json.loads(stored("task", "get", "--id", "ref-task").stdout)
    assert got["steps"][1]["depends_on"] == ["box"] and "retry_config" not in got["steps"][0]
    (stored.root / "got.json").write_text(stored("task", "get", "--id", "ref-task").stdout)
    again = stored("task", "create", "got.json", "--id", "ref-task")
    assert again.stdout.strip() == "task ref-task: v1, unchanged"
    assert "passed (hello: 1)" in stored("task", "run", "--id", "ref-task").stdout

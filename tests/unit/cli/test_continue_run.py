"""``task run --start-step N --context-json FILE`` continues a saved run: the steps before N are
taken as done with the outputs the saved run recorded (the agent's reply among them), so a task
author can change a verifier and grade the same reply again without running the agent again.
The saved run's deployments are not re-attached, and a step that needs one says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_runner import cli

AGENT = {"id": "agent", "type": "deploy_agent", "a2a_agent_id": "nop"}
ASK = {"id": "ask", "type": "prompt_agent", "prompt": "Say hello."}


def check(criterion: dict[str, Any]) -> dict[str, Any]:
    return {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
            "criteria": [criterion]}


def store(tmp_path: Path, capsys: Any, steps: list[dict[str, Any]]) -> None:
    path = tmp_path / "task.json"
    path.write_text(json.dumps(steps))
    assert cli(capsys, "task", "create", str(path), "--id", "greet")[0] == 0


def saved_run(tmp_path: Path, capsys: Any) -> Path:
    """Run v1 (nop replies nothing; the verifier wants 'hello'): the saved record."""
    store(tmp_path, capsys, [AGENT, ASK, check({"type": "response_contains",
                                                 "needles": ["hello"]})])
    code, out, err = cli(capsys, "task", "run", "--id", "greet", "--output-dir",
                         str(tmp_path / "first"))
    assert code == 1, out + err
    (record,) = (tmp_path / "first").glob("*.json")
    return record


def test_a_changed_verifier_grades_the_saved_reply_without_running_the_agent(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    record = saved_run(tmp_path, capsys)
    # the author fixes the verifier: an empty reply is what nop gives
    store(tmp_path, capsys, [AGENT, ASK, check({"type": "response_regex_present",
                                                 "pattern": "^$"})])
    code, out, err = cli(capsys, "task", "run", "--id", "greet", "--start-step", "2",
                         "--context-json", str(record), "--output-dir", str(tmp_path / "again"))
    assert code == 0, out + err
    assert f"Loaded context from {record}" in out
    assert (f"continuing at step 2 ('check'): 2 earlier step(s) taken from {record} "
            "(not re-attached: agents agent)") in out + err
    assert "step 1/3 agent" not in out + err and "step 2/3 ask" not in out + err
    (again,) = (tmp_path / "again").glob("*.json")
    data = json.loads(again.read_text())
    assert data["task_version"] == 2 and data["scores"] == {"check": 1.0}
    assert data["completed_steps"] == ["agent", "ask", "check"]
    assert data["context"]["agents"] == {}  # nothing was deployed
    assert data["context"]["metadata"]["resumed_from"] == {
        "source": str(record), "instance_id": json.loads(record.read_text())["instance_id"],
        "start_step": 2, "skipped_steps": ["agent", "ask"]}
    assert data["context"]["outputs"]["ask"]["response"] == ""


def test_a_step_that_needs_a_deployment_of_the_saved_run_names_where_to_start(
        state_root: Path, tmp_path: Path, capsys: Any) -> None:
    record = saved_run(tmp_path, capsys)
    code, out, err = cli(capsys, "task", "run", "--id", "greet", "--start-step", "1",
                         "--context-json", str(record))
    assert code == 1
    assert ("agent 'agent' was deployed by a step before --start-step 1 (in the run this one "
            "continues), and a continued run does not re-attach to another run's deployments "
            "(their tokens are never written down); start at or before the step that deploys "
            "it") in out + err


def test_bad_continuations_are_one_line_errors(state_root: Path, tmp_path: Path,
                                               capsys: Any) -> None:
    record = saved_run(tmp_path, capsys)
    cases = {
        ("--start-step", "3", "--context-json", str(record)):
            "Error: --start-step 3 is out of range: the task has 3 steps (0 to 2)",
        ("--start-step", "1"):
            "Error: --start-step and --context-json go together",
        ("--start-step", "1", "--context-json", str(record), "--k", "2"):
            "Error: --start-step continues one run; use it without --k",
    }
    not_json = tmp_path / "notes.txt"
    not_json.write_text("hello")
    cases[("--start-step", "1", "--context-json", str(not_json))] = (
        f"Error: --context-json: {not_json} is not JSON")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(record.read_text()), "task_id": "elsewhere"}))
    cases[("--start-step", "1", "--context-json", str(other))] = (
        f"Error: --context-json: {other} is a run of task 'elsewhere', not 'greet'")
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps({**json.loads(record.read_text()), "completed_steps": []}))
    cases[("--start-step", "1", "--context-json", str(failed))] = (
        "Error: --start-step 1: step 'agent' did not complete in the saved run")
    no_context = tmp_path / "bare.json"
    no_context.write_text(json.dumps({"steps": []}))
    cases[("--start-step", "1", "--context-json", str(no_context))] = (
        f"Error: --context-json: {no_context} has no saved context with step outputs")
    for args, expected in cases.items():
        code, out, err = cli(capsys, "task", "run", "--id", "greet", *args)
        assert code != 0 and expected in err, (args, out, err)
        assert "Traceback" not in err

"""An imported Harbor task runs on the real engine: its environment/Dockerfile is built into the
env (with the shell server the import adds), ``model-agent`` works in that container through
the ``bash`` tool (driven by a SCRIPTED model the test adds to the bundle, as a user would add a
model), and the task's own ``tests/test.sh`` scores it after the agent is done. An agent that
does nothing scores 0 and the run is ``failed``, not ``error``; partial rewards from
``reward.json`` are rows of their own."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker
TASKS = Path(__file__).parents[2] / "unit" / "harbor" / "tasks"


def add_scripted_agent(bundle: Path, task: str, turns: list[dict]) -> None:
    """The test's model: a script the scripted model plays, and model-agent to follow it."""
    script = bundle / "artifacts" / "solve_script"
    script.mkdir()
    (script / "script.json").write_text(json.dumps({"name": "solve_script", "turns": turns}))
    path = bundle / "tasks" / f"{task}.json"
    steps = json.loads(path.read_text())
    steps.insert(0, {"id": "model", "type": "scripted_model",
                     "script_artifact_id": "solve_script"})
    for step in steps:
        if step["type"] == "deploy_agent":
            step["a2a_agent_id"] = "model-agent"
        if step["type"] == "prompt_agent":
            step["model"] = "scripted:solve_script"
            step["depends_on"].append("model")
    path.write_text(json.dumps(steps, indent=2))


def rows_of(agent_env, out: str) -> list[dict]:
    """The score rows of the run's one verification, from its record."""
    instance = out.split(", instance ")[1].split()[0]
    shown = agent_env("task", "get-instance", instance)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["context"]["metadata"]["verifications"]["reward"]["results"]


def imported(agent_env, tmp_path: Path, task: str) -> Path:
    source = tmp_path / "harbor"
    shutil.copytree(TASKS / task, source / task)
    done = agent_env("bundle", "import", "harbor", str(source), "-o", str(tmp_path / "bundle"))
    assert done.returncode == 0, done.stderr
    return tmp_path / "bundle"


def test_an_agent_solving_the_task_in_its_container_scores_1(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    bundle = imported(agent_env, tmp_path, "hello-file")
    add_scripted_agent(bundle, "hello-file", [
        {"match": {"tool_offered": "bash"},
         "tool_calls": [{"name": "bash", "arguments": {
             "command": "printf 'Hello, world!' > hello.txt; pwd; ls /tests"}}]},
        # answered only if the agent worked in /app and the tests were not there to see
        {"match": {"last_tool_result_contains": "/app\\nls: cannot access '/tests'"},
         "text": "Done: hello.txt is written."},
    ])
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tasks/hello-file.json v1: passed (tests: 1)" in done.stdout, done.stdout
    assert left_by(done.stdout) == []


def test_an_agent_that_does_nothing_fails_on_the_tests_verdict(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    bundle = imported(agent_env, tmp_path, "hello-file")
    add_scripted_agent(bundle, "hello-file", [{"text": "I did nothing."}])
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 1
    assert "tasks/hello-file.json v1: scored below 1 (tests: 0)" in done.stdout, done.stdout
    (row,) = rows_of(agent_env, done.stdout)
    assert (row["id"], row["score"], row["result"]) == ("reward", 0.0, False)
    assert "hello.txt is missing or wrong" in row["justification"]  # test.sh's own words
    assert left_by(done.stdout) == []


def test_reward_json_gives_one_row_per_named_reward(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    bundle = imported(agent_env, tmp_path, "partial-credit")
    add_scripted_agent(bundle, "partial-credit", [
        {"match": {"tool_offered": "bash"},
         "tool_calls": [{"name": "bash", "arguments": {"command": "printf '1\\n2\\n' > "
                                                                  "numbers.txt"}}]},
        {"match": {"last_tool_result_contains": "exit_code"}, "text": "Wrote two of them."},
    ])
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 1
    assert "tasks/partial-credit.json v1: scored below 1 (tests: 0.5)" in done.stdout, done.stdout
    rows = rows_of(agent_env, done.stdout)
    assert [(r["id"], r["score"]) for r in rows] == [("correct", 0.0), ("exists", 1.0)]
    assert left_by(done.stdout) == []


# -- a compose task: main and a PostgreSQL sidecar (built from Debian's packages) ----------------

FIX_ORDER = [
    {"match": {"tool_offered": "bash"},
     "tool_calls": [{"name": "bash", "arguments": {
         "command": "psql -c \"UPDATE orders SET status = 'delivered' WHERE id = 1002\""}}]},
    # answered only if psql reached the db service by its name and changed one row
    {"match": {"last_tool_result_contains": "UPDATE 1"}, "text": "Order 1002 is delivered."},
]


def test_a_compose_task_runs_main_beside_its_database_sidecar(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    """The sidecar keeps its name (main's psql reaches ``db``), its healthcheck (main starts once
    PostgreSQL answers) and its named volume (seeded from the image, removed at teardown)."""
    bundle = imported(agent_env, tmp_path, "orders-compose")
    add_scripted_agent(bundle, "orders-compose", FIX_ORDER)
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "service db ready" in done.stdout + done.stderr
    assert "tasks/orders-compose.json v1: passed (tests: 1)" in done.stdout, done.stdout
    (row,) = rows_of(agent_env, done.stdout)
    assert "1002=delivered" in row["justification"]  # test.sh read the rows from db
    assert left_by(done.stdout) == []


def test_a_compose_task_left_alone_scores_0(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    bundle = imported(agent_env, tmp_path, "orders-compose")
    add_scripted_agent(bundle, "orders-compose", [{"text": "I did nothing."}])
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 1
    assert "tasks/orders-compose.json v1: scored below 1 (tests: 0)" in done.stdout, done.stdout
    (row,) = rows_of(agent_env, done.stdout)
    assert "1002=pending" in row["justification"]
    assert left_by(done.stdout) == []


def test_a_sidecar_that_never_gets_healthy_fails_the_deploy_naming_it(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    bundle = imported(agent_env, tmp_path, "orders-compose")
    settings = bundle / "envs" / "orders-compose-db" / "env.toml"
    text = settings.read_text().replace("pg_isready -h 127.0.0.1 -U shop -d shop",
                                        "exit 1").replace("retries = 60", "retries = 2")
    settings.write_text(text)
    add_scripted_agent(bundle, "orders-compose", FIX_ORDER)
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "service db is unhealthy (its healthcheck failed)" in out, out
    assert "--- last log lines of the db container ---" in out
    assert "tasks/orders-compose.json v1: error" in done.stdout, done.stdout
    assert left_by(done.stdout) == []


def test_tests_that_read_a_dot_folder_find_it_in_the_container(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    """tests/.truth/ is part of what the task ships: it reaches /tests with the rest."""
    source = tmp_path / "harbor" / "truth"
    shutil.copytree(TASKS / "hello-file", source)
    (source / "tests" / ".truth").mkdir()
    (source / "tests" / ".truth" / "expected.txt").write_text("Hello, world!")
    (source / "tests" / "test.sh").write_text(
        "#!/bin/bash\nif cmp -s /app/hello.txt /tests/.truth/expected.txt; then\n"
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  ls -la /tests/.truth\n"
        "  echo 0 > /logs/verifier/reward.txt\nfi\n")
    done = agent_env("bundle", "import", "harbor", str(source), "-o", str(tmp_path / "bundle"))
    assert done.returncode == 0, done.stderr
    bundle = tmp_path / "bundle"
    add_scripted_agent(bundle, "truth", [
        {"match": {"tool_offered": "bash"},
         "tool_calls": [{"name": "bash", "arguments": {
             "command": "printf 'Hello, world!' > hello.txt"}}]},
        {"match": {"last_tool_result_contains": "exit_code"}, "text": "Done."},
    ])
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tasks/truth.json v1: passed (tests: 1)" in done.stdout, done.stdout
    assert left_by(done.stdout) == []


# -- schema 1.3: the verifier in a container of its own, given the task's artifacts ---------------

def test_a_separate_verifier_scores_the_artifacts_in_its_own_container(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    bundle = imported(agent_env, tmp_path, "answer-separate")
    add_scripted_agent(bundle, "answer-separate", [
        {"match": {"tool_offered": "bash"},
         "tool_calls": [{"name": "bash", "arguments": {
             "command": "echo 42 > /app/answer.txt; ls /verifier-marker"}}]},
        # answered only if the agent's container lacks the verifier's marker
        {"match": {"last_tool_result_contains": "No such file"}, "text": "Written."},
    ])
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tasks/answer-separate.json v1: passed (tests: 1)" in done.stdout, done.stdout
    (row,) = rows_of(agent_env, done.stdout)
    assert "the answer is right" in row["justification"]
    assert left_by(done.stdout) == []


def test_a_separate_verifier_without_the_artifact_scores_0(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    """An artifact the agent never wrote is missing in the verifier's container: the tests
    judge that (0), it is not an error of the run."""
    bundle = imported(agent_env, tmp_path, "answer-separate")
    add_scripted_agent(bundle, "answer-separate", [{"text": "I did nothing."}])
    done = agent_env("run", str(bundle), timeout=900)
    assert done.returncode == 1
    assert "tasks/answer-separate.json v1: scored below 1 (tests: 0)" in done.stdout, done.stdout
    (row,) = rows_of(agent_env, done.stdout)
    # the tests ran in the verifier's container (its marker), and no answer reached it
    assert "marker: the verifier's container; answer: cat: /app/answer.txt: No such file" \
        in row["justification"]
    assert left_by(done.stdout) == []


# -- oracle and nop: is each task solvable, and does doing nothing score 0? ----------------------

def test_validate_runs_the_oracle_and_nop_and_names_the_broken_task(
        agent_env, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    """A dataset of one-container, compose and separate-verifier tasks: ``bundle validate``
    runs --agent oracle (each task's solution/solve.sh, with [solution] env), which passes
    every task with a solution, and --agent nop, which scores 0 on every task; the task
    without a solution is named broken, with its verifier's words, and the others still ran."""
    source = tmp_path / "harbor"
    shutil.copytree(TASKS, source)
    done = agent_env("bundle", "import", "harbor", str(source), "-o", str(tmp_path / "bundle"))
    assert done.returncode == 0, done.stderr

    checked = agent_env("bundle", "validate", str(tmp_path / "bundle"), timeout=1800)
    out = checked.stdout
    assert checked.returncode == 1, out + checked.stderr
    oracle, nop = out.split("== --agent nop: every task must score 0")
    for task in ("answer-separate", "hello-file", "orders-compose"):
        assert f"tasks/{task}.json v1: passed (tests: 1)" in oracle, out + checked.stderr
        assert f"tasks/{task}.json v1: scored below 1 (tests: 0)" in nop, out
    assert "names no solution for the oracle" in out + checked.stderr
    assert "Validation: 3 of 4 tasks valid" in out
    (line,) = [x for x in out.splitlines() if x.startswith("  broken: ")]
    assert line.startswith("  broken: partial-credit: oracle scored below 1 (tests: 0) ("), line
    assert "the agent: this task names no solution for the oracle" in line
    assert left_by(out) == []

# ruff: noqa: E501 - the reference task file is kept exactly as written
"""``agent-env run`` as users run it."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

HELLO = Path(__file__).resolve().parents[2] / "core/agent_env/bundles/shipped/hello"

# The reference's own hello task file, byte for byte in shape.
REFERENCE_HELLO_JSON = """[
  {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_mode": "vm", "sandbox_type": "local"},
  {"id": "load", "type": "load_artifact", "sandbox_name": "box", "artifact_id": "greeting",
   "destination_path": "/app/greeting"},
  {"id": "hello", "type": "verify_sandbox", "sandbox_name": "box", "base_dir": "/app/greeting",
   "verifier_id": "hello", "criteria": [
     {"type": "probe_file_contains", "criterion": "greets", "paths": ["hello.txt"], "expected": "hello"},
     {"type": "bash_cmd_succeeds", "criterion": "check passes", "bash_cmd": "bash check.sh"}
   ]}
]
"""

HELLO_LINES = [
    "artifacts/greeting: v1 (new)",
    "tasks/hello.json: v1 (new)",
    "[tasks/hello.json] step 1/3 box (deploy_sandbox)",
    r"\[tasks/hello.json\] step 1/3 box done in \d+\.\ds",
    "[tasks/hello.json] step 2/3 load (load_artifact)",
    r"\[tasks/hello.json\] step 2/3 load done in \d+\.\ds",
    "[tasks/hello.json] step 3/3 hello (verify_sandbox)",
    r"\[tasks/hello.json\] step 3/3 hello done in \d+\.\ds",
    r"\[tasks/hello.json\] passed in \d+\.\ds",
    "",
    "Tasks:",
    r"  tasks/hello.json v1: passed \(hello: 1\), \d+\.\ds, instance "
    r"@local/agentenv-framework/hello/hello-[a-z0-9]{8}",
    "",
    "Tore down 1 sandbox.",
]


def assert_lines(output: str, patterns: list[str]) -> None:
    lines = output.splitlines()
    assert len(lines) == len(patterns), output
    for line, pattern in zip(lines, patterns, strict=True):
        if line != pattern:
            assert re.fullmatch(pattern, line), f"{line!r} !~ {pattern!r}\n{output}"


def no_work_folders(agent_env) -> bool:
    folder = agent_env.state / "sandboxes" / "local"
    return not folder.exists() or not any(folder.iterdir())


def test_hello_passes_then_a_rerun_is_unchanged(agent_env):
    first = agent_env("run", "hello")
    assert first.returncode == 0, first.stderr
    assert_lines(first.stdout, HELLO_LINES)
    second = agent_env("run", "hello")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[:2] == [
        "artifacts/greeting: v1, unchanged", "tasks/hello.json: v1, unchanged"]
    assert no_work_folders(agent_env)
    instance = re.search(r"instance (\S+)", second.stdout).group(1)
    shown = agent_env("task", "get-instance", instance)
    record = json.loads(shown.stdout)
    assert record["status"] == "completed" and record["completed_steps"] == ["box", "load", "hello"]


def test_listing(agent_env):
    result = agent_env("run")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PACKAGE", "CONTENTS", "DESCRIPTION"]
    row = next(i for i, line in enumerate(lines) if line.startswith("hello "))  # plugins add more
    assert lines[row].split()[1] == "agentenv-framework"
    assert "1 task" in lines[row] and "The smallest bundle" in lines[row]
    assert lines[row + 1].strip() == str(HELLO)
    assert lines[-1] == ("Run one with agent-env run NAME. To change one, copy its folder and "
                         "run the copy.")


def test_unknown_bundle(agent_env):
    result = agent_env("run", "nosuch")
    assert result.returncode == 1
    assert result.stderr.strip() == ("Error: 'nosuch' is neither a folder nor an installed bundle "
                                     "(agent-env run lists the installed bundles)")


def test_an_edited_copy_writes_v2_and_scores_below_1(agent_env):
    copy = agent_env.root / "my-hello"
    shutil.copytree(HELLO, copy)
    assert agent_env("run", "./my-hello").returncode == 0
    (copy / "artifacts/greeting/hello.txt").write_text("goodbye\n")
    result = agent_env("run", "./my-hello")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "artifacts/greeting: v2 (files changed: hello.txt)"
    assert lines[1] == "tasks/hello.json: v1, unchanged"
    assert re.search(r"tasks/hello.json v1: scored below 1 \(hello: 0\), ", result.stdout)
    assert "@local/" in result.stdout and "my-hello/hello-" in result.stdout


def test_a_reference_style_folder_runs(agent_env):
    folder = agent_env.root / "that-folder"
    (folder / "tasks").mkdir(parents=True)
    (folder / "artifacts/greeting").mkdir(parents=True)
    (folder / "README.md").write_text("The smallest bundle.\n")
    (folder / "tasks/hello.json").write_text(REFERENCE_HELLO_JSON)
    (folder / "artifacts/greeting/hello.txt").write_text("hello\n")
    (folder / "artifacts/greeting/check.sh").write_text('[[ $(< hello.txt) == *hello* ]]\n')
    result = agent_env("run", "./that-folder")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tasks/hello.json v1: passed (hello: 1)" in result.stdout


def test_a_broken_bundle_lists_every_problem(agent_env):
    folder = agent_env.root / "broken"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks/t.json").write_text(json.dumps([
        {"id": "a", "type": "bogus"},
        {"id": "a", "type": "deploy_sandbox"},
        {"id": "b", "type": "load_artifact", "artifact_id": "nope", "depends_on": ["z"]},
        {"id": "c", "type": "deploy_sandbox", "depends_on": "b"},
    ]))
    (folder / "tasks/bad.json").write_text('[\n{"id": "x",\n}]')
    result = agent_env("run", "./broken")
    assert result.returncode == 1
    assert result.stdout == ""
    err = result.stderr
    assert err.startswith("Error: ") and "has 6 problems; nothing was run:" in err
    for text in ["tasks/bad.json:3: invalid JSON",
                 "step 'a': 'bogus' is not a known step type",
                 "step 2: id 'a' is already used by step 1",
                 "step 'b': depends_on 'z' names no step in this task",
                 "step 'c': depends_on must be a list of step ids",
                 "step 'b': artifact_id 'nope' names no artifact in this bundle"]:
        assert text in err, err
    assert not (agent_env.state / "sandboxes").exists()


def test_path_traversal_is_refused(agent_env):
    folder = agent_env.root / "sneaky"
    shutil.copytree(HELLO, folder)
    (folder / "artifacts/greeting/passwd").symlink_to("/etc/passwd")
    steps = json.loads((folder / "tasks/hello.json").read_text())
    steps[1]["destination_path"] = "/app/../../etc"
    (folder / "tasks/hello.json").write_text(json.dumps(steps))
    result = agent_env("run", "./sneaky")
    assert result.returncode == 1
    assert "artifacts/greeting: passwd is a symlink out of its folder" in result.stderr
    assert "destination_path '/app/../../etc' leaves its folder through '..'" in result.stderr
    # an absolute destination outside /app is refused by the sandbox at run time
    (folder / "artifacts/greeting/passwd").unlink()
    steps[1]["destination_path"] = "/etc/agent-env-test"
    (folder / "tasks/hello.json").write_text(json.dumps(steps))
    result = agent_env("run", "./sneaky")
    assert result.returncode == 1
    # the sandbox's own words, not its error class
    assert ("failed at step 'load': '/etc/agent-env-test/check.sh' is outside the local sandbox "
            "(only /app and paths under it are inside)") in result.stdout
    assert not Path("/etc/agent-env-test").exists()
    assert result.stdout.splitlines()[-1] == "Tore down 1 sandbox."


@pytest.mark.parametrize("signum, code, reason", [
    (signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_signal_cancels_records_and_tears_down(agent_env, signum, code, reason):
    folder = agent_env.root / "slow"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks/slow.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "local"},
        {"id": "wait", "type": "verify_sandbox",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "sleep 30"}]},
    ]))
    process = agent_env.start("run", "./slow")
    deadline = time.monotonic() + 20
    sandboxes = agent_env.state / "sandboxes" / "local"
    while time.monotonic() < deadline:  # wait until the slow step runs
        if sandboxes.exists() and any(sandboxes.iterdir()):
            break
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    assert process.returncode == code, out + err
    assert out.splitlines()[-1] == "Tore down 1 sandbox."
    assert f"cancelled by {reason}" in out + err
    assert no_work_folders(agent_env)
    instance = re.search(r"instance (\S+)", out).group(1)
    record = json.loads(agent_env("task", "get-instance", instance).stdout)
    assert record["status"] == "cancelled"


def test_two_runs_at_once_on_one_state_root(agent_env):
    first = agent_env.start("run", "hello")
    second = agent_env.start("run", "hello")
    out1, err1 = first.communicate(timeout=60)
    out2, err2 = second.communicate(timeout=60)
    assert first.returncode == 0, out1 + err1
    assert second.returncode == 0, out2 + err2
    assert "passed (hello: 1)" in out1 and "passed (hello: 1)" in out2
    versions = {line for line in (out1 + out2).splitlines() if line.startswith("artifacts/")}
    assert versions <= {"artifacts/greeting: v1 (new)", "artifacts/greeting: v1, unchanged"}


def test_dry_run_writes_and_runs_nothing(agent_env):
    result = agent_env("run", "hello", "--dry-run")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "artifacts/greeting: would write v1 (new)"
    assert "would run 3 steps: box, load, hello" in result.stdout
    assert agent_env("run", "hello").stdout.startswith("artifacts/greeting: v1 (new)")


def test_stored_tasks(agent_env):
    assert agent_env("run", "hello").returncode == 0
    greeting = "@local/agentenv-framework/hello/greeting"
    steps = json.loads((HELLO / "tasks/hello.json").read_text())
    steps[1]["artifact_id"] = greeting
    task_file = agent_env.root / "t.json"
    task_file.write_text(json.dumps(steps))
    assert agent_env("task", "validate", str(task_file)).returncode == 0
    created = agent_env("task", "create", str(task_file), "--id", "my-task")
    assert created.stdout.strip() == "task my-task: v1 (new)"
    assert agent_env("task", "create", str(task_file), "--id", "my-task").stdout.strip() == \
        "task my-task: v1, unchanged"
    got = json.loads(agent_env("task", "get", "--id", "my-task").stdout)
    assert got["version"] == 1 and got["steps"][1]["artifact_id"] == greeting
    out_dir = agent_env.root / "out"
    ran = agent_env("task", "run", "--id", "my-task", "--output-dir", str(out_dir))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "my-task v1: passed (hello: 1)" in ran.stdout
    (written,) = out_dir.glob("*.json")
    assert json.loads(written.read_text())["status"] == "completed"
    bad = agent_env.root / "bad.json"
    bad.write_text(json.dumps([{"id": "a", "type": "bogus"}, {"id": "b", "type": "load_artifact",
                                                             "artifact_id": "@local/none"}]))
    invalid = agent_env("task", "validate", str(bad))
    assert invalid.returncode == 1
    assert "'bogus' is not a known step type" in invalid.stderr
    assert "artifact_id '@local/none' names no artifact" in invalid.stderr

"""``run_docker_container`` on the real engine: the shipped ``task-container`` bundle builds a
container of the task's own, loads its tests into it, runs them there as another user, runs a
one-off job to completion and collects files back; and each way it can fail is one line naming
the container."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

BUNDLE = (Path(__file__).resolve().parents[3]
          / "plugins/docker_env/agentenv_docker_env/bundles/task-container")


def record(agent_env: Any, output: str) -> dict[str, Any]:
    (instance,) = re.findall(r"instance (\S+)", output)
    done = agent_env("task", "get-instance", instance)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_task_container_bundle_tests_collects_and_runs_a_job(
        agent_env: Any, left_by: Callable[[str], list[str]]) -> None:
    done = agent_env("run", "task-container", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed (unit: 1)" in done.stdout
    outputs = record(agent_env, done.stdout)["context"]["outputs"]
    # the tests ran in the container, as tester (one of them checks it)
    assert outputs["unit"]["exit_code"] == 0
    assert "Ran 3 tests" in outputs["unit"]["output_tail"]
    assert "test_runs_as_the_user_the_step_names" in outputs["unit"]["output_tail"]
    # the job ran to completion and its output is the step's
    assert outputs["job"]["exit_code"] == 0
    assert "2 + 3 = 5" in outputs["job"]["output_tail"]
    # files came back out of the container
    assert {"/app/calc.py", "/app/tests/test_calc.py"} <= set(outputs["collect"]["files"])
    assert outputs["app"]["container_name"] == "calc"
    assert left_by(done.stdout) == []


def test_each_failure_names_the_container_and_why(
        agent_env: Any, tmp_path: Path, left_by: Callable[[str], list[str]]) -> None:
    bundle = tmp_path / "broken"
    shutil.copytree(BUNDLE, bundle)
    app = bundle / "artifacts/calc-app/Dockerfile"
    # a container that exits at once: its ready_command never passes
    app.write_text(app.read_text().replace(
        'CMD ["sh", "-c", "touch /tmp/ready && exec sleep infinity"]',
        'CMD ["sh", "-c", "echo no database configured >&2; exit 1"]'))
    soft = {"fail_task_on_error": False}
    (bundle / "tasks/calc.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "docker"},
        {"id": "app", "type": "run_docker_container", "sandbox_name": "box",
         "docker_context_artifact_id": "calc-app", "container_name": "calc",
         "ready_command": "test -f /tmp/ready", "timeout_seconds": 60, **soft},
        {"id": "job", "type": "run_docker_container", "sandbox_name": "box",
         "docker_context_artifact_id": "calc-app", "container_name": "once", "wait": True,
         "command_override": "sh -c 'echo boom >&2; exit 3'", **soft},
        {"id": "unit", "type": "run_container_unit_tests_verifier", "sandbox_name": "box",
         "container_name": "ghost", "test_command": "true", **soft},
    ]))
    done = agent_env("run", str(bundle), timeout=600)
    text = done.stdout + done.stderr
    assert done.returncode != 0
    assert "container calc exited with code 1:\nno database configured" in text
    assert "(before its ready_command passed)" in text
    assert "container once exited with code 3:\nboom" in text
    assert "no container 'ghost' was started in sandbox" in text
    assert "a run_docker_container step before this one starts it" in text
    assert "Traceback" not in text
    assert left_by(done.stdout) == []


def test_keys_that_need_host_powers_are_refused_before_the_run(agent_env: Any,
                                                               tmp_path: Path) -> None:
    task = tmp_path / "t.json"
    task.write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "docker"},
        {"id": "app", "type": "run_docker_container", "sandbox_name": "box",
         "docker_context_url": "https://example.com/ctx.zip", "privileged": True,
         "build_args": {"A": "1"}, "container_name": "Bad Name", "network": "host"}]))
    done = agent_env("task", "validate", str(task))
    assert done.returncode != 0
    for expected in ("docker_context_url: a build context is not fetched from a URL here",
                     "privileged: containers a task starts here run unprivileged",
                     "network: containers a task starts here run unprivileged",
                     "build_args: this builder passes no build arguments",
                     "container_name 'Bad Name' must be lowercase letters"):
        assert expected in done.stderr, done.stderr

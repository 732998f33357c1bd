"""Issue 21, class 5: whatever goes wrong once a Docker sandbox exists, teardown runs, the run's
record is not left ``running``, and the user gets a summary or a one-line reason.

A toy plugin (written into a site folder, found by its entry point like any outside plugin)
records the run's instance id and injects a failure at the stage the test names: a run event
observer calling ``sys.exit``, a step raising ``KeyboardInterrupt`` or producing a value no store
can hold. The shipped ``run_code`` step returning NaN is the case the hostile test found.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

INJECTOR = '''
import math
import os
import sys
from pathlib import Path

import attrs
from agent_env.hookspecs import hookimpl
from agent_env.tasks.steps import Step

WHERE = os.environ.get("INJECT_AT", "")
LOG = Path(os.environ["INJECT_LOG"])


@attrs.define(kw_only=True)
class Produce(Step):
    """Puts what INJECT_AT names into its outputs, or raises it."""

    type = "produce"

    async def run(self, ctx):
        if WHERE == "step:KeyboardInterrupt":
            raise KeyboardInterrupt
        if WHERE == "step:SystemExit":
            sys.exit(9)
        values = {"step:inf": 1e400, "step:long-int": 10 ** 5000,
                  "step:too-large": "x" * 400_000}
        ctx.outputs[self.id] = {"value": values.get(WHERE, 1)}


@hookimpl
def agent_env_step_types():
    return [Produce]


@hookimpl
def agent_env_run_event(event):
    if event.kind == "run_started":
        LOG.write_text(event.instance_id)
    if WHERE == f"event:{event.kind}:{event.step_id}":
        sys.exit(7)
'''

NAN_SCRIPT = '''
def run(*args, **kwargs):
    return float("nan")
'''


@pytest.fixture
def crash_bundle(agent_env: Any) -> Path:
    agent_env.add_plugin("toy_injector", INJECTOR)
    agent_env.env["INJECT_LOG"] = str(agent_env.root / "instance.txt")
    folder = agent_env.root / "b"
    (folder / "tasks").mkdir(parents=True)
    (folder / "artifacts" / "nan").mkdir(parents=True)
    (folder / "artifacts" / "nan" / "run.py").write_text(NAN_SCRIPT)
    (folder / "tasks" / "t.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box",
         "sandbox_mode": "container", "sandbox_type": "docker", "image": "python:3.11-slim"},
        {"id": "produce", "type": "produce"},
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "true"}]},
    ]))
    (folder / "tasks" / "nan.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box",
         "sandbox_mode": "container", "sandbox_type": "docker", "image": "python:3.11-slim"},
        {"id": "score", "type": "run_code", "script_artifact_id": "nan"},
    ]))
    return folder


def left_up(docker_client: Any, instance: str) -> list[str]:
    label = {"label": f"agentenv.run={instance}"}
    return ([c.name for c in docker_client.containers.list(all=True, filters=label)]
            + [n.name for n in docker_client.networks.list(filters=label)])


def run_crashing(agent_env: Any, bundle: Path, task: str, where: str) -> tuple[Any, str]:
    agent_env.env["INJECT_AT"] = where
    result = agent_env("run", str(bundle), "--task", task, timeout=180)
    instance = (agent_env.root / "instance.txt").read_text()
    return result, instance


@pytest.mark.parametrize("where, message", [
    ("step:inf", "outputs.produce.value is inf (JSON has no NaN or infinity)"),
    ("step:long-int", "outputs.produce.value is an integer of more than 4000 digits"),
    ("step:too-large", "a run record holds at most 256 KB"),
])
def test_a_value_no_store_can_hold_fails_its_step_by_name_and_tears_down(
        agent_env: Any, crash_bundle: Path, docker_client: Any, where: str,
        message: str) -> None:
    result, instance = run_crashing(agent_env, crash_bundle, "t.json", where)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "failed" in result.stdout and message in result.stdout + result.stderr
    assert "Tore down 1 sandbox" in result.stdout + result.stderr
    assert left_up(docker_client, instance) == []
    record = json.loads(agent_env("task", "get-instance", instance).stdout)
    assert record["status"] == "failed"
    assert [f["step_id"] for f in record["failures"]] == ["produce"]
    assert message in record["failures"][0]["error"]


def test_run_code_returning_nan_fails_the_step_and_tears_down(
        agent_env: Any, crash_bundle: Path, docker_client: Any) -> None:
    result, instance = run_crashing(agent_env, crash_bundle, "nan.json", "")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "run() returned NaN, which JSON has no form for" in result.stdout + result.stderr
    assert left_up(docker_client, instance) == []
    record = json.loads(agent_env("task", "get-instance", instance).stdout)
    assert record["status"] == "failed"


@pytest.mark.parametrize("where, code", [
    ("event:step_finished:box", 7),  # right after the sandbox came up
    ("event:step_started:check", 7),
    ("event:run_finished:None", 7),  # after the final record
    ("step:SystemExit", 9),
    ("step:KeyboardInterrupt", 130),
])
def test_an_exit_at_any_stage_after_deploy_still_tears_down_and_ends_the_record(
        agent_env: Any, crash_bundle: Path, docker_client: Any, where: str, code: int) -> None:
    result, instance = run_crashing(agent_env, crash_bundle, "t.json", where)
    assert result.returncode == code, result.stdout + result.stderr
    assert "Tore down 1 sandbox" in result.stdout + result.stderr
    assert left_up(docker_client, instance) == []
    record = json.loads(agent_env("task", "get-instance", instance).stdout)
    assert record["status"] != "running", record

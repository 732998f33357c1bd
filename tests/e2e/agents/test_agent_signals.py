"""A run whose agent is mid-prompt, stopped by Ctrl-C, SIGTERM or ``kill -9``: the first two
tear everything down (env, its gateway, the model gateway, the agent and its front) and exit
130 / 143; after ``kill -9`` nothing could, and ``agent-env gc`` removes what is left. Either
way nothing stays.

The agent is the model-agent, driven by the scripted model to call a tool that waits a minute,
so the run is surely mid-prompt when the signal comes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from run_children import Run, gc, names, owned_by

pytestmark = pytest.mark.docker

SLOW = Path(__file__).parents[2] / "integration" / "agents" / "a2a" / "bundles" / "slow"
TASK = [
    {"id": "deploy", "type": "deploy_env", "env_id": "slow", "sandbox_type": "docker"},
    {"id": "model", "type": "scripted_model", "script_artifact_id": "wait_script"},
    {"id": "agent", "type": "deploy_agent", "a2a_agent_id": "model-agent", "env_ids": ["slow"]},
    {"id": "ask", "type": "prompt_agent", "prompt": "wait", "model": "scripted:wait_script",
     "timeout_seconds": 300},
]
#: what one run brings up: the env, its gateway, the model gateway, the agent and its front,
#: and the sandbox's DNS answerer
CONTAINERS = 6


@pytest.fixture
def busy_bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "busy-agent"
    shutil.copytree(SLOW, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    (bundle / "tasks" / "t.json").write_text(json.dumps(TASK))
    return bundle


@pytest.fixture
def runs(docker_client: Any) -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:  # whatever the test left (it asserts there is nothing)
        if run.process.poll() is None:
            run.process.kill()
            run.process.communicate()
        for container in owned_by(docker_client, run.pid)["containers"]:
            docker_client.api.remove_container(container["Id"], force=True)
        for network in owned_by(docker_client, run.pid)["networks"]:
            docker_client.api.remove_network(network["Id"])


def start_busy(tmp_path: Path, bundle: Path, name: str, docker_client: Any,
               runs: list[Run]) -> Run:
    run = Run(tmp_path, str(bundle), name)
    runs.append(run)
    run.wait_for_line(r"step 4/4 ask \(prompt_agent\)")
    deadline = time.monotonic() + 30
    while len(owned_by(docker_client, run.pid)["containers"]) < CONTAINERS:
        assert time.monotonic() < deadline, names(owned_by(docker_client, run.pid))
        time.sleep(0.1)
    time.sleep(1.0)  # the agent is now waiting on the tool
    return run


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_prompt_tears_everything_down(
        tmp_path: Path, busy_bundle: Path, docker_client: Any, runs: list[Run],
        signum: int, code: int) -> None:
    run = start_busy(tmp_path, busy_bundle, signum.name, docker_client, runs)
    sent = time.monotonic()
    run.process.send_signal(signum)
    returncode, out, err = run.finish(timeout=60)
    took = time.monotonic() - sent
    assert returncode == code, out + err
    assert "cancelled" in out and "Tore down 1 sandbox" in out, out + err
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}
    assert took < 30, f"teardown took {took:.1f}s"


def test_kill_9_mid_prompt_leaves_what_gc_removes(
        tmp_path: Path, busy_bundle: Path, docker_client: Any, runs: list[Run]) -> None:
    run = start_busy(tmp_path, busy_bundle, "killed", docker_client, runs)
    left = owned_by(docker_client, run.pid)
    run_id = left["containers"][0]["Labels"]["agentenv.run"]
    os.kill(run.pid, signal.SIGKILL)
    run.process.communicate()
    assert len(owned_by(docker_client, run.pid)["containers"]) == CONTAINERS  # nothing tore down

    removed = gc("--yes", "--label", f"agentenv.run={run_id}", state=run.state)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "Removed 1 sandbox." in removed.stdout
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}

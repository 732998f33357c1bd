"""``agent-env run <agent>-smoke`` for each shipped coding agent (claude-code, codex, gemini,
opencode, pi, openhands, aider) via the CLI: the real CLIs and agent loops (pinned from the npm
registry or PyPI, built into their images on first use, found by content hash after) call the
echo env's tool and answer, driven offline by the SCRIPTED model
through the run's model gateway; a second prompt of the same A2A context resumes the CLI's
session. The run record links each prompt's trajectory (the CLI's own events, its version, and
the gateway's model calls with tokens), and the agent container never holds the upstream key."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")
KEY = "sk-e2e-coding-agents-upstream-key-4417"
CASES = {
    "aider": {"bundle": "aider-smoke", "cli": "aider", "version": "0.86.2", "format": "aider/1",
              "needle": "aider smoke 2719", "again": "Earlier in this session"},
    "claude-code": {"bundle": "claude-code-smoke", "cli": "claude", "version": "2.1.332",
                    "format": "claude-code-stream-json/1", "needle": "claude smoke 5521",
                    "again": "Earlier in this session"},
    "codex": {"bundle": "codex-smoke", "cli": "codex", "version": "0.171.0",
              "format": "codex-exec-json/1", "needle": "codex smoke 8812",
              "again": "Earlier in this thread"},
    "gemini": {"bundle": "gemini-smoke", "cli": "gemini", "version": "0.61.0",
               "format": "gemini-stream-json/1", "needle": "gemini smoke 4177",
               "again": "Earlier in this session"},
    "opencode": {"bundle": "opencode-smoke", "cli": "opencode", "version": "1.18.33",
                 "format": "opencode-events/1", "needle": "opencode smoke 3391",
                 "again": "Earlier in this session"},
    # OpenHands' script also runs a shell command and ends with its finish tool
    "openhands": {"bundle": "openhands-smoke", "cli": "openhands", "version": "1.58.2",
                  "format": "openhands-events/1", "needle": "openhands smoke 6042",
                  "again": "Earlier in this conversation", "calls": 3, "tools": 3},
    "pi": {"bundle": "pi-smoke", "cli": "pi", "version": "0.73.1", "format": "pi-json/1",
           "needle": "pi smoke 6173", "again": "Earlier in this session"},
}


def _agent_env_vars(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(state), E2E_UPSTREAM_KEY=KEY)
    return env


def _agent_container(docker_client: Any, proc: subprocess.Popen[str],
                     agent: str) -> tuple[list[str], set[str]] | None:
    """The agent container's environment and networks, caught while the run is going (None if
    the run ended first)."""
    while proc.poll() is None:
        for container in docker_client.containers.list(
                filters={"label": [f"agentenv.agent={agent}", "agentenv.role=agent"]}):
            return (list(container.attrs["Config"]["Env"] or []),
                    set(container.attrs["NetworkSettings"]["Networks"]))
        time.sleep(0.2)
    return None


@pytest.mark.parametrize("agent", sorted(CASES))
def test_coding_agent_smoke_bundle_passes_offline(agent: str, tmp_path: Path, left_by: Any,
                                                  docker_client: Any) -> None:
    case = CASES[agent]
    state = tmp_path / "state"
    env = _agent_env_vars(state)
    # An upstream is configured (nothing listens there): the scripted model still answers
    # scripted:<name>, and only the model gateway container may hold the key.
    config = tmp_path / "config.toml"
    config.write_text('[model]\nbase_url = "http://127.0.0.1:9/v1"\n'
                      'api_key = "env:E2E_UPSTREAM_KEY"\n')
    started = time.monotonic()
    proc = subprocess.Popen([str(AGENT_ENV), "--config", str(config), "run", case["bundle"]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = _agent_container(docker_client, proc, agent)
    out, err = proc.communicate(timeout=900)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, out + err
    assert "tasks/smoke.json v1: passed (answer: 1, echoes: 1, session: 1)" in out, out
    # first prompt: a tool call into the env and an answer, two model calls through the gateway
    model_calls, tool_calls = case.get("calls", 2), case.get("tools", 1)
    assert re.search(rf"agents/{agent}: '\S+' answered \(completed\) with model "
                     rf"scripted:\w+: {model_calls} model call\(s\), \d+ input \+ \d+ output "
                     rf"tokens, {tool_calls} tool call\(s\)", out), out
    assert re.search(rf"agents/{agent}: image agentenv/{agent}:[0-9a-f]{{16}}", out), out
    assert left_by(out) == []
    assert seen is not None, "the run ended before its agent container was seen"
    agent_env_vars, networks = seen
    # sealed: on the sandbox's sealed network alone (what it can reach there is probed in
    # tests/integration/agents/a2a/test_sealed_network.py)
    assert len(networks) == 1 and next(iter(networks)).endswith("-sealed"), networks
    assert not [v for v in agent_env_vars if KEY in v]
    assert any(v.startswith("AGENTENV_MODEL_BASE_URL=http://model-gateway:") for v in
               agent_env_vars)
    assert KEY not in out + err

    instance = re.search(r"instance (\S+)", out).group(1)  # type: ignore[union-attr]
    shown = subprocess.run([str(AGENT_ENV), "--config", str(config), "task", "get-instance",
                            instance], capture_output=True, text=True, env=env, timeout=60,
                           check=True)
    assert KEY not in shown.stdout
    outputs = json.loads(shown.stdout)["context"]["outputs"]
    assert [o["network_policy"] for o in outputs.values() if "network_policy" in o] == [
        "sealed"]
    from agent_env.stores.filesystem import FilesystemObjectStore

    objects = FilesystemObjectStore(state / "objects")
    trajectories = {}
    for prompt in ("ask", "again"):
        reply = outputs[prompt]
        assert reply["error_type"] is None and reply["model"].startswith("scripted:")
        events = json.loads(objects.get(reply["agent_trajectory_object_key"]))
        trajectories[prompt] = events
        assert events[0] == {"type": "agentenv.format", "format": case["format"]}
        cli = events[1]
        assert (cli["type"], cli["cli"], cli["version"]) == ("agentenv.cli", case["cli"],
                                                             case["version"])
        usage = events[-1]
        assert usage["type"] == "agentenv.usage"
        assert usage["model_calls"] and all(c["usage"]["input"] > 0 and c["status"] == 200
                                            for c in usage["model_calls"])
    # given a skill: the CLI offers it
    if agent in ("claude-code", "gemini", "opencode", "openhands"):
        calls = objects.get(outputs["ask"]["model_call_log_object_key"]).decode()
        assert "skill-marker-4471" in calls
    assert case["needle"] in outputs["ask"]["response"]
    assert case["again"] in outputs["again"]["response"]
    assert outputs["ask"]["a2a_context_id"] == outputs["again"]["a2a_context_id"]
    assert (trajectories["ask"][1]["resumed"], trajectories["again"][1]["resumed"]) == (
        False, True)
    # the CLI's own events are in the trajectory: its tool call into the env and its answer
    raw = json.dumps(trajectories["ask"])
    assert "echo" in raw and case["needle"] in raw
    print(f"\n{agent}: agent-env run {case['bundle']} took {seconds:.1f}s")

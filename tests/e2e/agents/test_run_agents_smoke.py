"""``agent-env run agents-smoke`` via the CLI: the model-agent answers through the echo env with
the scripted model, offline, and nothing is left behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def agent_env(state: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state)}
    for name in ("AGENT_ENV_CONFIG", "AGENT_ENV_MODEL_BASE_URL", "AGENT_ENV_MODEL_API_KEY"):
        env.pop(name, None)
    return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def test_agents_smoke_passes_with_the_scripted_model(tmp_path: Path, left_by: Any) -> None:
    run = agent_env(tmp_path, "run", "agents-smoke")
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/smoke.json v1: passed (answer: 1, echoes: 1)" in out
    # The model is named as the scripted one wherever it shows.
    assert re.search(r"agents/model-agent: 'agent' answered \(completed\) with model "
                     r"scripted:echo_script: 2 model call\(s\), \d+ input \+ \d+ output tokens, "
                     r"1 tool call\(s\)", out), out
    assert re.search(r"model-gateway: image agentenv/agentenv-model-gateway:[0-9a-f]{16}", out)
    assert re.search(r"agents/model-agent: image agentenv/model-agent:[0-9a-f]{16}", out)
    assert "Tore down 1 sandbox" in out
    assert left_by(out) == []

    # A rerun finds every image by its content hash.
    again = agent_env(tmp_path, "run", "agents-smoke")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "tasks/smoke.json v1: passed (answer: 1, echoes: 1)" in again.stdout
    for image in ("model-gateway: image agentenv/agentenv-model-gateway",
                  "agents/model-agent: image agentenv/model-agent", "envs/echo: image"):
        assert re.search(re.escape(image) + r".*\(cached\)$", again.stdout, re.MULTILINE), \
            again.stdout
    assert left_by(again.stdout) == []


def test_the_a2a_validators_on_a_deployed_agent_and_env(tmp_path: Path, left_by: Any) -> None:
    """verify_a2a_agent_mcp counts the tool calls the echo env's gateway saw (for the earlier
    prompt, and for one it sends itself); peer-agents/v1 round-trips a peer list (the relay
    itself is test_peer_agents'); verify_a2a_role round-trips a role."""
    import json
    import shutil

    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "validated"
    shutil.copytree(BUNDLES / "agents-smoke", bundle)
    (bundle / "artifacts" / "again_script").mkdir()
    (bundle / "artifacts" / "again_script" / "script.json").write_text(json.dumps({
        # turns are counted over the whole conversation: the first prompt's two came first
        "name": "again_script", "turns": [
            {"text": "(the first prompt's turn)"}, {"text": "(the first prompt's turn)"},
            {"match": {"tool_offered": "echo"},
             "tool_calls": [{"name": "echo", "arguments": {"text": "again"}}]},
            {"match": {"last_tool_result_contains": "again"}, "text": "It said: again"}]}))
    task = bundle / "tasks" / "smoke.json"
    steps = [
        *json.loads(task.read_text()),
        {"id": "again_model", "type": "scripted_model", "script_artifact_id": "again_script"},
        {"id": "mcp", "type": "verify_a2a_agent_mcp", "depends_on": ["ask"], "prompt_id": "ask"},
        {"id": "mcp_again", "type": "verify_a2a_agent_mcp",
         "depends_on": ["mcp", "again_model"], "model": "scripted:again_script",
         "timeout_seconds": 120},
        {"id": "peers", "type": "verify_a2a_peer_agents", "depends_on": ["ask"],
         "peer_prompt_id": "ask", "expected_token": "agents smoke 7431"},
        {"id": "role", "type": "verify_a2a_role", "depends_on": ["ask"]},
    ]
    task.write_text(json.dumps(steps))
    run = agent_env(tmp_path / "state", "run", str(bundle))
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    scores = re.search(r"tasks/smoke.json v1: passed \((.*?)\)", out)
    assert scores is not None, out
    assert sorted(scores.group(1).split(", ")) == [
        "answer: 1", "echoes: 1", "mcp: 1", "mcp_again: 1", "peers: 1", "role: 1"]
    assert left_by(out) == []

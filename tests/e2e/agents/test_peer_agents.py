"""``peer_agents`` on Docker: two model-agents in one sandbox (the SCRIPTED model, offline);
the asker, peered with the helper, calls its peer_send_message tool; the helper answers over
A2A through its front; verify_a2a_peer_agents scores the relay."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from .test_run_agents_smoke import agent_env

pytestmark = pytest.mark.docker

HELPER = {"name": "helper_script", "turns": [
    {"match": {"last_user_contains": "code word"}, "text": "The code word is PINEAPPLE"}]}
ASKER = {"name": "asker_script", "turns": [
    {"match": {"tool_offered": "peers__peer_send_message"},
     "tool_calls": [{"name": "peers__peer_send_message",
                     "arguments": {"peer": "helper", "message": "What is the code word?"}}]},
    {"match": {"last_tool_result_contains": "PINEAPPLE"},
     "text": "My peer says: The code word is PINEAPPLE"}]}
STEPS = [
    {"id": "deploy", "type": "deploy_env", "env_id": "echo", "sandbox_type": "docker"},
    {"id": "models", "type": "scripted_model", "script_artifact_id": "helper_script"},
    {"id": "models2", "type": "scripted_model", "script_artifact_id": "asker_script"},
    {"id": "helper", "type": "deploy_agent", "depends_on": ["deploy"], "agent_name": "helper",
     "a2a_agent_id": "model-agent", "env_ids": ["echo"]},
    {"id": "asker", "type": "deploy_agent", "depends_on": ["deploy"], "agent_name": "asker",
     "a2a_agent_id": "model-agent", "env_ids": ["echo"]},
    # the helper's model is set through agent-config by its first prompt, and stays
    {"id": "warm", "type": "prompt_agent", "depends_on": ["helper", "models"],
     "agent_name": "helper", "model": "scripted:helper_script",
     "prompt": "Be ready to tell the code word.", "timeout_seconds": 120},
    {"id": "peers", "type": "peer_agents", "depends_on": ["warm", "asker"],
     "peerings": [{"source_agent_name": "asker", "peer_agent_names": ["helper"]}]},
    {"id": "ask", "type": "prompt_agent", "depends_on": ["peers", "models2"],
     "agent_name": "asker", "model": "scripted:asker_script", "timeout_seconds": 120,
     "prompt": "Ask your peer helper for the code word."},
    {"id": "relay", "type": "verify_a2a_peer_agents", "depends_on": ["ask"],
     "agent_name": "asker", "peer_prompt_id": "ask", "expected_token": "PINEAPPLE"},
]


def test_an_agent_messages_its_peer_through_its_tool(tmp_path: Path, left_by: Any) -> None:
    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "peers"
    shutil.copytree(BUNDLES / "agents-smoke", bundle, ignore=shutil.ignore_patterns("__pycache__"))
    (bundle / "tasks" / "smoke.json").unlink()
    for script in (HELPER, ASKER):
        (bundle / "artifacts" / script["name"]).mkdir()
        (bundle / "artifacts" / script["name"] / "script.json").write_text(json.dumps(script))
    (bundle / "tasks" / "peers.json").write_text(json.dumps(STEPS))
    run = agent_env(tmp_path / "state", "run", str(bundle))
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/peers.json v1: passed (relay: 1)" in out, out
    assert re.search(r"'asker' answered \(completed\) .* 1 tool call\(s\)", out), out
    assert left_by(out) == []

"""A bundle's own ``agents/<name>`` and ``skills/<name>`` folders, as the reference lays bundles
out: preflight finds the agent before the run stores it, the run stores both beside the bundle's
other entities (a versioned agent, an artifact) and deploys the agent with the skill; a broken
folder is a preflight problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentenv_agents.plugin import AGENTS, BUNDLES

from .test_conversation import agent_env

pytestmark = pytest.mark.docker


def bundle_with_own_agent(tmp_path: Path) -> Path:
    bundle = tmp_path / "own"
    shutil.copytree(BUNDLES / "conversation-smoke", bundle)
    (bundle / "tasks" / "triggered.json").unlink()  # the conversation task alone
    shutil.copytree(AGENTS / "model-agent", bundle / "agents" / "helper",
                    ignore=shutil.ignore_patterns("__pycache__"))
    task = bundle / "tasks" / "conversation.json"
    steps = json.loads(task.read_text())
    (bundle / "skills" / "tone").mkdir(parents=True)
    (bundle / "skills" / "tone" / "SKILL.md").write_text(
        "---\nname: tone\ndescription: How to sound.\n---\nBe brief.\n")
    for step in steps:
        if step["type"] == "deploy_agent":
            step["a2a_agent_id"] = "helper"  # the bundle's folder, not the installed agent
            # the bundle's skills/tone: loaded as an artifact when the agent deploys (a name
            # that reached the run unresolved would fail the step)
            step["skills"] = [{"artifact_id": "tone", "description": "How to sound."}]
    task.write_text(json.dumps(steps))
    return bundle


def test_a_bundles_own_agent_is_stored_and_deployed(tmp_path: Path, left_by: Any) -> None:
    bundle = bundle_with_own_agent(tmp_path)
    state = tmp_path / "state"
    done = agent_env(state, "run", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agents/helper: v1 (new)" in done.stdout
    assert "skills/tone: v1 (new)" in done.stdout
    assert "tasks/conversation.json v1: passed (answer: 1)" in done.stdout
    assert left_by(done.stdout) == []
    stored = json.loads(agent_env(state, "a2a-agent", "list", "--json").stdout)["stored"]
    assert [row["id"] for row in stored] == [f"@local/{str(bundle).lstrip('/')}/helper"]


def test_a_broken_agent_folder_stops_the_run_before_anything_is_written(tmp_path: Path) -> None:
    bundle = bundle_with_own_agent(tmp_path)
    (bundle / "agents" / "helper" / "agent.toml").write_text("colour = 1\n")
    done = agent_env(tmp_path / "state", "run", str(bundle))
    assert done.returncode == 1 and done.stdout == ""
    assert "agent.toml: unknown key(s) colour" in done.stderr
    (bundle / "agents" / "helper" / "agent.toml").unlink()
    (bundle / "agents" / "helper" / "Dockerfile").unlink()
    done = agent_env(tmp_path / "state", "run", str(bundle))
    assert done.returncode == 1
    assert "agents/helper: needs a Dockerfile or an agent.toml" in done.stderr

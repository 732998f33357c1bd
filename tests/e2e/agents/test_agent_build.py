"""``agent-env a2a-agent build`` and what ``a2a-agent list`` says of each installed agent: the
versions its image pins and whether that image is built on the local engine."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agentenv_agents.plugin import AGENTS

pytestmark = pytest.mark.docker


def listed(agent_env: Any) -> dict[str, Any]:
    done = agent_env("a2a-agent", "list", "--json")
    assert done.returncode == 0, done.stderr
    return {row["id"]: row for row in json.loads(done.stdout)["agents"]}


def test_build_then_list_says_built_and_pins(agent_env: Any, docker_client: Any) -> None:
    refused = agent_env("a2a-agent", "build", "--id", "nop")
    assert refused.returncode == 1
    assert "agent 'nop' is a nop agent: it has no image to build" in refused.stderr

    built = agent_env("a2a-agent", "build", "--id", "model-agent")
    assert built.returncode == 0, built.stdout + built.stderr
    lines = built.stdout.strip().splitlines()
    tag = lines[-1].removeprefix("agents/model-agent: ")
    assert re.fullmatch(r"agentenv/model-agent:[0-9a-f]{16}", tag), lines
    assert any(line.startswith("agents/model-agent: done in ") for line in lines), lines
    assert docker_client.images.get(tag) is not None
    # the build's sandbox is gone: nothing carries its label
    label = {"label": "agentenv.agent-build=model-agent"}
    assert docker_client.networks.list(filters=label) == []
    assert docker_client.containers.list(all=True, filters=label) == []

    rows = listed(agent_env)
    assert rows["model-agent"]["built"] is True
    assert rows["nop"]["built"] is None and rows["oracle"]["built"] is None
    assert isinstance(rows["claude-code"]["built"], bool)
    pin = re.search(r"^ARG CLAUDE_CODE_VERSION=(\S+)$",
                    (AGENTS / "claude-code" / "Dockerfile").read_text(), re.MULTILINE)
    assert pin is not None and rows["claude-code"]["pinned"] == [f"claude-code {pin.group(1)}"]
    assert rows["model-agent"]["pinned"] == []

    text = agent_env("a2a-agent", "list").stdout
    (line,) = [x for x in text.splitlines() if x.startswith("model-agent ")]
    assert re.search(r"\s-\s+built\s+agentenv-framework-agents\s", line), line

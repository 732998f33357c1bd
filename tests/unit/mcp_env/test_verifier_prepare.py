"""``env_outcome_verifier`` warms up while the env deploys: it loads the official ``mcp`` client
early only for a script that imports it (a script on AgentEnv's own client costs nothing)."""

from __future__ import annotations

import pytest

from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile, MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agentenv_mcp_env import steps
from agentenv_mcp_env.steps import EnvOutcomeVerifier, imports_mcp

OFFICIAL = "from mcp import ClientSession\nasync def verify(url):\n    return []\n"
OURS = "from agentenv_protocol.client import McpClient\n# mcp is not imported here\n"


@pytest.mark.parametrize(("script", "wanted"), [
    (OFFICIAL, True),
    ("import mcp\n", True),
    ("    from mcp.client.streamable_http import streamablehttp_client\n", True),
    (OURS, False),
    ("import mcpx\nfrom mcp_tools import x\n", False),
    ("text = 'from mcp import x'\n", False),
])
def test_imports_mcp(script: str, wanted: bool) -> None:
    assert imports_mcp(script) is wanted


@pytest.mark.parametrize(("script", "preloaded"), [(OFFICIAL, 1), (OURS, 0)])
async def test_prepare_preloads_only_for_a_script_that_imports_mcp(
        script: str, preloaded: int, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []

    async def preload() -> None:
        calls.append(True)

    monkeypatch.setattr(steps, "preload_mcp_client", preload)
    artifact = ArtifactContent("@t/b/artifacts/check", 1, "file",
                               [ArtifactFile("verify.py", script.encode())])
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts([artifact]))
    await EnvOutcomeVerifier(id="v", env_id="envs/e", file_artifact_id=artifact.id).prepare(ctx)
    assert len(calls) == preloaded

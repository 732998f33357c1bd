"""``load_artifact`` with ``agent_name``: files go into the agent through its ``put_file``, and a
``cli`` artifact is installed as the reference installs one. ``FileTakingAgent`` is a test
double for a deployed agent with a container (the Docker tier installs into a real one:
tests/e2e/agents/test_cli_artifacts.py)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from agent_env.bundles.parse import parse_bundle
from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile, CliSpec, MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.step_types.artifact_steps import LoadArtifact
from agent_env.tasks.steps import StepError


class FileTakingAgent:
    """Test double: records each file written into it, with its mode."""

    name = "coder"

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, int]] = {}

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        self.files[path] = (data, mode)


class Gateway:
    """Test double: an env deployment, for the URL a CLI is given."""

    internal_url = "http://gateway:18765"
    token = "tok-123"


CLI_ART = ArtifactContent("slack-cli", 1, "cli", (
    ArtifactFile("bin/slack", b"#!/bin/sh\necho hi\n"), ArtifactFile("lib/util.sh", b"x")),
    cli=CliSpec("slack", "bin/slack"))
DATA = ArtifactContent("notes", 1, "file", (ArtifactFile("notes.txt", b"n", 0o640),))


def load(agent: Any, **step: Any) -> tuple[TaskContext, Any]:
    ctx = TaskContext(task_id="t", instance_id="t-1",
                      artifacts=MemoryArtifacts([CLI_ART, DATA]))
    if agent is not None:
        ctx.agents["coder"] = agent
    ctx.envs["slack"] = Gateway()
    run = LoadArtifact(id="load", **step)
    asyncio.run(run.run(ctx))
    return ctx, ctx.outputs["load"]


def test_files_go_into_the_agent() -> None:
    agent = FileTakingAgent()
    _, out = load(agent, agent_name="coder", artifact_id="notes", destination_path="/work")
    assert agent.files == {"/work/notes.txt": (b"n", 0o640)}
    assert out["loaded"] == ["/work/notes.txt"]
    assert out["artifacts"] == {"notes": "/work"}


def test_a_cli_is_installed_with_its_gateway_beside_it() -> None:
    agent = FileTakingAgent()
    _, out = load(agent, agent_name="coder", env_id="slack", artifact_id="slack-cli")
    assert agent.files["/opt/cli/slack/bin/slack"][1] == 0o755
    assert agent.files["/opt/cli/slack/lib/util.sh"] == (b"x", 0o644)
    assert agent.files["/opt/cli/slack/bin/.env"] == (
        b"AGENT_ENV_GATEWAY_URL=http://gateway:18765/t/tok-123\n", 0o644)
    assert out["installed_clis"] == {"slack-cli": {"command_name": "slack",
                                                   "install_path": "/opt/cli/slack/bin/slack"}}
    assert out["agent_name"] == "coder"


@pytest.mark.parametrize("agent, step, said", [
    (None, {"agent_name": "coder", "artifact_id": "notes"},
     "agent 'coder' is not deployed in this task (deployed: none)"),
    (object(), {"agent_name": "coder", "artifact_id": "notes"},
     "agent 'coder' cannot take files"),
    (FileTakingAgent(), {"agent_name": "coder", "artifact_id": "slack-cli"},
     "give env_id, the env whose gateway it calls"),
])
def test_what_cannot_be_loaded_is_one_line(agent: Any, step: dict[str, Any], said: str) -> None:
    with pytest.raises(StepError, match=re.escape(said)):
        load(agent, **step)


@pytest.mark.parametrize("toml, said", [
    ('type = "cli"\ncommand_name = "slack"\n', "entrypoint is required"),
    ('type = "cli"\ncommand_name = "slack"\nentrypoint = "bin/nope"\n',
     "entrypoint 'bin/nope' is not one of its files"),
    ('type = "cli"\ncommand_name = "no spaces"\nentrypoint = "bin/slack"\n',
     "command_name 'no spaces' must be one word"),
    ('type = "cli"\ncommand_name = "s"\nentrypoint = "bin/slack"\nenv = "x"\n',
     "unknown key(s) env"),
])
def test_a_bundles_cli_artifact_is_checked(tmp_path: Path, toml: str, said: str) -> None:
    folder = tmp_path / "artifacts" / "slack-cli"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "slack").write_text("#!/bin/sh\n")
    (folder / "artifact.toml").write_text(toml)
    _, problems = parse_bundle(tmp_path, "@local/b")
    assert any(said in p for p in problems), problems
    (folder / "artifact.toml").write_text(
        'type = "cli"\ncommand_name = "slack"\nentrypoint = "bin/slack"\n')
    found, problems = parse_bundle(tmp_path, "@local/b")
    assert problems == [] and found.artifacts[0].cli == CliSpec("slack", "bin/slack")

"""The CLI-agent kit (``CliAgent``, ``cli_version``): a small agent built on it runs a FAKE CLI
(a shell script standing in for a real one) as a real process: its trajectory starts with the
format and the ``agentenv.cli`` event, the CLI never sees the agent's token or the variables the
agent names, no model means a one-line failure, and a cancelled prompt kills the CLI's whole
process group."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentenv_protocol.agent import (
    CliAgent,
    CliAgentConfig,
    TaskRequest,
    TaskResult,
    a2a_agent,
    cli_version,
)
from agentenv_protocol.agent.models import AgentIdentity
from agentenv_protocol.agent.trajectory import TrajectoryStore
from agentenv_protocol.parts import TextPart


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@a2a_agent(identity=AgentIdentity(name="fake-cli-agent", version="0"), config=CliAgentConfig)
class FakeCliAgent(CliAgent):
    """Runs ``self.cli`` with the prompt on stdin; its events are kept, its last ``say``
    event is the reply."""

    trajectory_format = "fake-cli/1"
    cli_name = "fake-cli"
    version = "9.9.9"
    foreign_env: ClassVar[tuple[str, ...]] = ("OTHER_PROVIDER_KEY",)
    cli = ""

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        args = [self.cli, model]
        self.begin(request, args, resumed=False)
        reply = ""
        async with await self.launch(args, request.text, {"GATEWAY": self.gateway_root}) as run:
            async for event in run.events():
                request.trajectory.append(event)
                reply = str(event.get("say") or reply)
            await run.wait()
        return TaskResult(text=reply)


def turn(config: CliAgentConfig) -> TaskRequest[Any]:
    store = TrajectoryStore()
    return TaskRequest(task_id="t-1", context_id="c-1", parts=[TextPart("hello there")],
                       config=config, mcp_servers={}, metadata={},
                       trajectory=store.open_task("c-1", "t-1"))


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeCliAgent:
    monkeypatch.setenv("AGENTENV_MODEL_BASE_URL", "http://model-gateway:4000/v1")
    monkeypatch.setenv("AGENTENV_MODEL_TOKEN", "run-token")
    monkeypatch.setenv("AGENTENV_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("A2A_TOKEN", "the-agents-own-token")
    monkeypatch.setenv("OTHER_PROVIDER_KEY", "sk-other")
    return FakeCliAgent()


async def test_the_cli_runs_in_the_work_folder_without_what_it_must_not_see(
        agent: FakeCliAgent, tmp_path: Path) -> None:
    agent.cli = script(tmp_path, "cli", (
        'read prompt; printf \'{"say": "%s / %s / %s / %s / %s"}\\n\' "$prompt" "$1" '
        '"$GATEWAY" "${A2A_TOKEN:-none}${OTHER_PROVIDER_KEY:-none}" "$(pwd)"'))
    request = turn(CliAgentConfig(model="scripted:s"))
    result = await agent.run(request)
    assert result.text == (f"hello there / scripted:s / http://model-gateway:4000 / nonenone / "
                           f"{tmp_path / 'work'}")
    store = request.trajectory._store
    assert store._contexts["c-1"].format == "fake-cli/1"
    assert store.whole(task_id="t-1")[0] == {
        "type": "agentenv.cli", "cli": "fake-cli", "version": "9.9.9", "resumed": False,
        "argv": [agent.cli, "scripted:s"]}


async def test_no_model_is_a_one_line_failure(agent: FakeCliAgent) -> None:
    result = await agent.run(turn(CliAgentConfig()))
    assert (result.error_type, result.error_code, result.error_message) == (
        "agent_error", "fake-cli.no_model", "no model endpoint or model name is configured")


async def test_a_cancelled_prompt_kills_the_cli_and_its_children(
        agent: FakeCliAgent, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    agent.cli = script(tmp_path, "cli", f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; wait")
    task = asyncio.create_task(agent.run(turn(CliAgentConfig(model="m"))))
    for _ in range(100):
        if pids.exists() and len(pids.read_text().split()) == 2:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for pid in map(int, pids.read_text().split()):
        for _ in range(40):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break  # killed, waiting to be reaped by its parent
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"process {pid} outlived the cancelled prompt")


def test_cli_version_reads_the_manifest_then_the_cli(tmp_path: Path) -> None:
    manifest = tmp_path / "package.json"
    manifest.write_text(json.dumps({"name": "x", "version": "1.2.3"}))
    assert cli_version(["false"], manifest) == "1.2.3"
    assert cli_version([script(tmp_path, "a", "echo 'codex-cli 0.171.0'")]) == "0.171.0"
    assert cli_version([script(tmp_path, "b", "echo '2.1.332 (Claude Code)'")]) == "2.1.332"
    assert cli_version([script(tmp_path, "c", "echo 0.73.1 >&2")], tmp_path / "none") == "0.73.1"
    assert cli_version([str(tmp_path / "no-such-cli")]) == "unknown"

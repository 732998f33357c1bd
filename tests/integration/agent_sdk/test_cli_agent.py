"""The CLI-agent kit (``CliAgent``, ``cli_version``): a small agent built on it runs a FAKE CLI
(a shell script standing in for a real one) as a real process: its trajectory starts with the
format and the ``agentenv.cli`` event, the CLI never sees the agent's token or the variables the
agent names, no model means a one-line failure, and a cancelled prompt kills the CLI's whole
process group. ``EpisodeAgent``: a FAKE agent loop in an agent file of its own runs as that
file's ``--episode`` process, started before the prompt, given the job and the envs' servers."""

from __future__ import annotations

import asyncio
import json
import os
import sys
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


#: An agent on the kit's EpisodeAgent, as an agent's file is: its episode process reports the
#: job it read, where mcp-call finds the envs' servers, and whether it was started before the
#: prompt (the import stand-in writes a file before the job is read).
EPISODE_AGENT = '''
import json, os, sys, time
from pathlib import Path
from agentenv_protocol.agent import CliAgentConfig, EpisodeAgent, TaskResult, a2a_agent
from agentenv_protocol.agent.models import AgentIdentity


@a2a_agent(identity=AgentIdentity(name="fake-episode", version="0"), config=CliAgentConfig)
class FakeEpisodeAgent(EpisodeAgent):
    cli_name = "fake-episode"
    turns_default = 7

    async def run(self, request):
        job = {"task": request.text, "max_turns": self.max_turns(request)}
        async with await self.start_episode(request, job) as run:
            events = [event async for event in run.events()]
            code = await run.wait()
        if not events or code != 0:
            return self.ended_early(code, run)
        return TaskResult(text=json.dumps(events[-1]))


def episode():
    from agentenv_protocol.agent.mcp_call import servers
    Path(os.environ["READY_FILE"]).write_text(str(os.getpid()))  # "imports" done
    job = json.load(sys.stdin)
    if job["task"] == "crash":
        print("boom: the loop fell over", file=sys.stderr)
        return 3
    print(json.dumps({"job": job, "servers": servers(), "argv": sys.argv[1:],
                      "pid": os.getpid()}), flush=True)
    return 0


if __name__ == "__main__":
    FakeEpisodeAgent.main(episode)
'''


async def test_an_episode_agent_runs_its_own_file_per_prompt_started_ahead(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    from agentenv_protocol.agent import McpServer, package_version

    source = tmp_path / "fake_episode_agent.py"
    source.write_text(EPISODE_AGENT)
    monkeypatch.setenv("AGENTENV_MODEL_BASE_URL", "http://model-gateway:4000/v1")
    monkeypatch.setenv("AGENTENV_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("READY_FILE", str(tmp_path / "ready"))
    spec = importlib.util.spec_from_file_location("fake_episode_agent", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fake_episode_agent", module)
    spec.loader.exec_module(module)
    agent = module.FakeEpisodeAgent()
    assert agent.process.args[1:] == [str(source), "--episode"]
    await agent.setup()
    try:
        for _ in range(200):  # started by setup, before any prompt
            if (tmp_path / "ready").exists():
                break
            await asyncio.sleep(0.05)
        first = int((tmp_path / "ready").read_text())
        request = turn(CliAgentConfig(model="m"))
        request.mcp_servers = {"echo": McpServer("echo", "http://gw/mcp", {"X-Token": "t"})}
        result = await agent.run(request)
        answer = json.loads(result.text or "")
        assert answer["job"] == {"task": "hello there", "max_turns": 7}
        assert answer["servers"] == {"echo": {"url": "http://gw/mcp",
                                              "headers": {"X-Token": "t"}}}
        assert answer["argv"] == ["--episode"]
        # the prompt was answered by the process setup started; the next one is waiting
        assert answer["pid"] == first
        assert agent.process.spare is not None and agent.process.spare.alive
        assert (tmp_path / "home" / ".agentenv-mcp-servers.json").stat().st_mode & 0o077 == 0
        crashed = await agent.run(TaskRequest(
            task_id="t-2", context_id="c-1", parts=[TextPart("crash")],
            config=CliAgentConfig(model="m"), mcp_servers={}, metadata={},
            trajectory=TrajectoryStore().open_task("c-1", "t-2")))
        assert (crashed.error_type, crashed.error_code) == ("agent_error", "fake-episode.failed")
        assert crashed.error_message is not None
        assert crashed.error_message.startswith("fake-episode exited with code 3 before it "
                                                "finished")
        assert "boom: the loop fell over" in crashed.error_message
    finally:
        await agent.teardown()
    assert agent.process.spare is None
    assert package_version("attrs") not in ("", "unknown")
    assert package_version("no-such-distribution-4471") == "unknown"


def _tar(members: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


async def test_a_cli_session_round_trips_through_save_and_load(
        agent: FakeCliAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(FakeCliAgent, "session_folders", (".fake/sessions",))
    sessions = tmp_path / "home" / ".fake" / "sessions"
    (sessions / "deep").mkdir(parents=True)
    (sessions / "deep" / "s-41.jsonl").write_text("the conversation")
    (tmp_path / "home" / ".fake" / "other.txt").write_text("not a session")
    assert await agent.save_session("c-1") is None  # no session in that context yet
    agent.sessions["c-1"] = "s-41"
    saved = await agent.save_session("c-1")
    assert saved is not None
    import shutil

    shutil.rmtree(tmp_path / "home")
    await agent.load_session("forked", saved)
    assert agent.sessions["forked"] == "s-41"
    assert (sessions / "deep" / "s-41.jsonl").read_text() == "the conversation"
    assert not (tmp_path / "home" / ".fake" / "other.txt").exists()  # only session folders


@pytest.mark.parametrize(("members", "why"), [
    ({"home/.fake/sessions/a": b"x"}, "it names no session"),
    ({"session.json": b'{"session": "s"}', "home/.fake/sessions/../../evil": b"x"},
     "'home/.fake/sessions/../../evil', which is not a plain file or folder in the CLI's "
     "session folders"),
    ({"session.json": b'{"session": "s"}', "home/.bashrc": b"x"}, "'home/.bashrc'"),
    ({"session.json": b'{"session": "s"}', "/etc/passwd": b"x"}, "'/etc/passwd'"),
])
async def test_a_hostile_session_is_refused_before_anything_is_written(
        agent: FakeCliAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        members: dict[str, bytes], why: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(FakeCliAgent, "session_folders", (".fake/sessions",))
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        await agent.load_session("forked", _tar(members))
    assert not (tmp_path / "home").exists() and "forked" not in agent.sessions
    with pytest.raises(ValueError, match="it is not a saved session"):
        await agent.load_session("forked", b"not a tar at all")

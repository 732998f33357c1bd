"""The CLI agents' bridges to their CLIs, without Docker (local processes and files): the command
lines they build, the Codex config they write, and what they make of a CLI that misbehaves (a
FAKE CLI, a shell script standing in for the real one, which the Docker tests in
``tests/integration/agents/coding`` and ``tests/e2e/agents/coding`` run)."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentenv_agents.plugin import AGENTS
from agentenv_protocol.agent import CliAgentConfig, McpServer, TaskRequest
from agentenv_protocol.agent.trajectory import TrajectoryStore
from agentenv_protocol.parts import TextPart


def load(folder: str) -> ModuleType:
    name = f"coding_agent_{folder.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(name, AGENTS / folder / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


claude = load("claude-code")
codex = load("codex")
gemini = load("gemini")
opencode = load("opencode")
pi = load("pi")


def request(module: ModuleType, config: Any, context: str = "ctx-1",
            servers: dict[str, McpServer] | None = None) -> TaskRequest[Any]:
    store = TrajectoryStore()
    return TaskRequest(task_id="task-1", context_id=context, parts=[TextPart("hello")],
                       config=config, mcp_servers=servers or {}, metadata={},
                       trajectory=store.open_task(context, "task-1"))


def fake_cli(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-cli"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_the_codex_config_is_toml_with_the_gateway_and_the_envs() -> None:
    servers = {"echo": McpServer("echo", "http://gateway:18765/mcp",
                                 {"Authorization": "Bearer t\"k", "AgentEnv-Role": "r"})}
    text = codex.codex_config("http://model-gateway:4000/v1", servers)
    parsed = tomllib.loads(text)
    assert parsed["model_provider"] == "agentenv"
    # nothing fetched from elsewhere: where only the gateway is reachable each costs seconds
    assert parsed["check_for_update_on_startup"] is False
    assert parsed["analytics"] == {"enabled": False}
    assert parsed["features"] == {"plugins": False, "apps": False, "in_app_updates": False}
    assert parsed["model_providers"]["agentenv"] == {
        "name": "AgentEnv model gateway", "base_url": "http://model-gateway:4000/v1",
        "env_key": "AGENTENV_MODEL_TOKEN", "wire_api": "responses"}
    assert parsed["mcp_servers"]["echo"] == {
        "url": "http://gateway:18765/mcp",
        "http_headers": {"Authorization": "Bearer t\"k", "AgentEnv-Role": "r"}}


def test_codex_resumes_the_thread_of_the_context() -> None:
    agent = codex.CodexAgent()
    first = agent.command(request(codex, CliAgentConfig(system_prompt="be brief")), "m", None)
    assert first[:2] == ["codex", "exec"] and first[-1] == "-"
    assert first[first.index("-c") + 1] == 'developer_instructions="be brief"'
    again = agent.command(request(codex, CliAgentConfig()), "m", "thread-9")
    assert again[:3] == ["codex", "exec", "resume"] and again[-2:] == ["thread-9", "-"]


def test_claude_starts_a_session_then_resumes_it(tmp_path: Path) -> None:
    agent = claude.ClaudeCodeAgent()
    servers = {"echo": McpServer("echo", "http://gateway:18765/mcp", {"Authorization": "B"})}
    args = agent.command(request(claude, CliAgentConfig(max_turns=3), servers=servers),
                         "m", "s-1", resume=False)
    assert args[args.index("--session-id") + 1] == "s-1" and "--resume" not in args
    assert args[args.index("--max-turns") + 1] == "3"
    mcp = Path(args[args.index("--mcp-config") + 1])
    assert '"Authorization": "B"' in mcp.read_text() and mcp.stat().st_mode & 0o077 == 0
    args = agent.command(request(claude, CliAgentConfig()), "m", "s-1", resume=True)
    assert args[args.index("--resume") + 1] == "s-1" and "--session-id" not in args


@pytest.fixture
def gateway_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTENV_MODEL_BASE_URL", "http://model-gateway:4000/v1")
    monkeypatch.setenv("AGENTENV_MODEL_TOKEN", "run-token")
    monkeypatch.setenv("AGENTENV_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    # the CLIs' own homes (settings, sessions) in the test's folder, never the user's
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(gemini, "HOME", tmp_path / "home" / ".gemini")
    monkeypatch.setattr(opencode, "CONFIG_DIR", tmp_path / "home" / ".config" / "opencode")


async def test_a_cli_printing_malformed_json_and_failing_is_an_agent_error_with_its_stderr(
        tmp_path: Path, gateway_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for module, agent_class in ((claude, "ClaudeCodeAgent"), (codex, "CodexAgent"),
                                (gemini, "GeminiAgent"), (opencode, "OpenCodeAgent"),
                                (pi, "PiAgent")):
        monkeypatch.setattr(module, "CLI", fake_cli(
            tmp_path, "cat > /dev/null; echo 'not json {'; echo 'boom: no model' >&2; exit 3"))
        agent = getattr(module, agent_class)()
        turn = request(module, CliAgentConfig(model="scripted:x"))
        result = await agent.run(turn)
        assert result.error_type == "agent_error", result
        assert "boom: no model" in (result.error_message or ""), (agent_class, result)
        assert "code 3" in (result.error_message or "")
        events = turn.trajectory._store.whole(task_id="task-1")
        assert {"type": "agentenv.unparsed", "line": "not json {"} in events


async def test_claude_reads_the_reply_usage_and_session_from_its_events(
        tmp_path: Path, gateway_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [
        '{"type":"system","subtype":"init","session_id":"s-42"}',
        '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"mcp__echo__echo"}]}}',
        '{"type":"result","subtype":"success","is_error":false,"result":"done",'
        '"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":2},'
        '"total_cost_usd":0.5}',
    ]
    body = "cat > /dev/null; " + "; ".join(f"echo '{line}'" for line in lines)
    monkeypatch.setattr(claude, "CLI", fake_cli(tmp_path, body))
    agent = claude.ClaudeCodeAgent()
    turn = request(claude, CliAgentConfig(model="scripted:x"), context="c-7")
    result = await agent.run(turn)
    assert result.text == "done" and result.error_type is None
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (15, 2)
    assert (turn.usage.tool_call_count, turn.usage.cost_usd) == (1, 0.5)
    assert agent.sessions == {"c-7": "s-42"}  # the next prompt of c-7 resumes it

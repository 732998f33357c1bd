"""``mcp-call``, the agent SDK's command that gives a shell-only agent (mini-swe-agent, pi) its
envs' MCP tools: against a real env server behind a real gateway, as the agent's container
runs it (a subprocess reading the servers file the agent wrote)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import attrs

from agentenv_protocol import AgentEnvEnvironment, AgentEnvError, environment_card
from agentenv_protocol import tool as env_tool
from agentenv_protocol.agent.mcp_call import write_servers
from agentenv_protocol.testing import serve_env, serve_gateway

MCP_CALL = Path(sys.executable).with_name("mcp-call")


@environment_card(name="shelf")
class Shelf(AgentEnvEnvironment):
    @env_tool(name="count")
    def count(self, kind: str) -> int:
        """How many items of a kind."""
        return {"jars": 9}.get(kind, 0)

    @env_tool(name="take")
    def take(self, name: str) -> str:
        """Take an item."""
        raise AgentEnvError("not_found", f"no item {name}")


@attrs.frozen
class Server:
    url: str
    headers: dict[str, str]


async def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, [str(MCP_CALL), *args], capture_output=True,
                                   text=True, timeout=60, env={"PATH": "/usr/bin", **env})


async def test_list_call_and_errors_through_a_real_gateway(tmp_path: Path) -> None:
    async with serve_env(Shelf()) as server, \
            serve_gateway([server.url], name="shelf", ready_timeout=10) as gateway:
        env = write_servers({"shelf": Server(f"{gateway.url}/mcp", gateway.auth_headers)},
                            tmp_path / "servers.json")
        assert (tmp_path / "servers.json").stat().st_mode & 0o777 == 0o600

        listed = await run(env, "list")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert "shelf/count: How many items of a kind." in lines
        schema = json.loads(lines[lines.index("shelf/count: How many items of a kind.") + 1]
                            .removeprefix("  input: "))
        assert schema["properties"]["kind"]["type"] == "string"

        counted = await run(env, "count", '{"kind": "jars"}')
        assert (counted.returncode, counted.stdout.strip()) == (0, "9")
        named = await run(env, "shelf/count", '{"kind": "cups"}')
        assert (named.returncode, named.stdout.strip()) == (0, "0")

        refused = await run(env, "take", '{"name": "lid"}')
        assert refused.returncode == 1 and "no item lid" in refused.stdout

        unknown = await run(env, "nosuch", "{}")
        assert unknown.returncode == 2 and "no server offers 'nosuch'" in unknown.stderr
        bad = await run(env, "count", "{kind: jars}")
        assert bad.returncode == 2 and "the arguments are not JSON" in bad.stderr

    gone = await run(env, "list")  # the gateway is down: one line, no traceback
    assert gone.returncode == 1 and gone.stderr.startswith("mcp-call: ")
    assert "Traceback" not in gone.stderr
    assert (await run({}, "list")).stderr.strip() == (
        "mcp-call: no MCP servers were given to this agent")

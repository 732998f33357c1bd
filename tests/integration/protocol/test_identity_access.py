"""Caller identity (``_meta`` over headers) and tool access rules (protocol.md section 5),
on the env server and through the gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from agentenv_protocol import (
    AgentEnvEnvironment,
    McpClient,
    ToolContext,
    environment_card,
    tool,
)
from agentenv_protocol.testing import RunningServer, serve_env, serve_gateway

ROLE = "agentenv.io/role"
SESSION = "agentenv.io/session"


@environment_card(name="guarded", tool_access=True)
class GuardedEnv(AgentEnvEnvironment):
    @tool(name="whoami")
    def whoami(self, ctx: ToolContext) -> dict[str, Any]:
        return {"role": ctx.role, "session": ctx.session, "tool": ctx.tool,
                "arguments": ctx.arguments, "call_id": ctx.call_id}

    @tool(name="read")
    def read(self) -> str:
        return "read"

    @tool(name="write")
    def write(self) -> str:
        return "write"

    @tool(name="admin", hidden_by_default=True)
    def admin(self) -> str:
        return "admin"


@pytest.fixture
async def guarded() -> AsyncIterator[RunningServer]:
    async with serve_env(GuardedEnv()) as srv:
        yield srv


async def _rules(url: str, action: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    async with aiohttp.ClientSession() as http, http.post(
            f"{url}/tools/{action}", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_context_is_injected_and_left_out_of_schema(guarded: RunningServer) -> None:
    async with McpClient(guarded.mcp_url) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["whoami"].input_schema == {"type": "object", "properties": {}}
        result = await client.call_tool("whoami", {"x": 1})
        assert result.structured_content == {"role": None, "session": client.session_id,
                                             "tool": "whoami", "arguments": {"x": 1},
                                             "call_id": result.structured_content["call_id"]}


async def test_meta_role_wins_over_headers(guarded: RunningServer) -> None:
    async with McpClient(guarded.mcp_url, headers={"AgentEnv-Role": "from-header"}) as client:
        by_header = await client.call_tool("whoami")
        assert by_header.structured_content["role"] == "from-header"
        by_meta = await client.call_tool("whoami", meta={ROLE: "grader", SESSION: "s-1"})
        assert by_meta.structured_content["role"] == "grader"
        assert by_meta.structured_content["session"] == "s-1"
        default = await client.call_tool("whoami", meta={ROLE: "default"})
        assert default.structured_content["role"] is None
        blank = await client.call_tool("whoami", meta={ROLE: "  "})
        assert blank.structured_content["role"] is None


async def test_hidden_tool_is_listed_with_meta(guarded: RunningServer) -> None:
    async with McpClient(guarded.mcp_url) as client:
        tools = {t.name: t for t in await client.list_tools()}
    assert tools["admin"].meta == {"agentenv.io/hiddenByDefault": True}
    assert tools["read"].meta is None


async def test_access_rules(guarded: RunningServer) -> None:
    async with McpClient(guarded.mcp_url) as client:
        async def call(name: str, role: str | None) -> Any:
            return await client.call_tool(name, meta={ROLE: role or "default"})

        hidden = await call("admin", None)
        assert hidden.is_error and hidden.structured_content["code"] == "permission_denied"
        assert not (await call("write", "agent")).is_error

        out = await _rules(guarded.url, "disable", {"role": "agent", "tools": ["write"]})
        assert out == {"role": "agent", "disabled": ["admin", "write"],
                       "allowed": ["read", "whoami"]}
        denied = await call("write", "agent")
        assert denied.is_error and denied.text.startswith("permission_denied: ")
        assert not (await call("write", "grader")).is_error

        # role "*" applies after the caller's role; a named rule beats a "*" rule
        await _rules(guarded.url, "disable", {"role": "*", "tools": "*"})
        assert (await call("read", "grader")).is_error
        await _rules(guarded.url, "enable", {"role": "grader", "tools": ["read"]})
        assert not (await call("read", "grader")).is_error
        assert (await call("whoami", "grader")).is_error

        # hidden tools skip "*" rules but follow a rule that names them
        await _rules(guarded.url, "enable", {"role": "*", "tools": "*"})  # clears every rule
        await _rules(guarded.url, "enable", {"role": "ops", "tools": "*"})
        assert (await call("admin", "ops")).is_error
        out = await _rules(guarded.url, "enable", {"role": "ops", "tools": ["admin"]})
        assert "admin" in out["allowed"]
        assert not (await call("admin", "ops")).is_error
        assert not (await call("read", "someone")).is_error


async def test_rules_routes_absent_without_tool_access(echo_server: RunningServer) -> None:
    async with aiohttp.ClientSession() as http, http.post(
            echo_server.url + "/tools/disable", json={"role": "x", "tools": "*"}) as r:
        assert r.status == 404


async def test_bad_rules_body(guarded: RunningServer) -> None:
    async with aiohttp.ClientSession() as http, http.post(
            guarded.url + "/tools/disable", json={"role": "x", "tools": 3}) as r:
        assert r.status == 400
        assert (await r.json())["error"]["code"] == "invalid_params"


async def test_gateway_stamps_role_and_session(guarded: RunningServer) -> None:
    async with serve_gateway([guarded.url]) as gw:
        async with McpClient(gw.mcp_url, headers={"AgentEnv-Role": "agent"}) as client:
            who = (await client.call_tool("whoami")).structured_content
            assert who["role"] == "agent"
            assert who["session"] == client.session_id  # the caller's gateway session
            who = (await client.call_tool("whoami", meta={ROLE: "grader", SESSION: "s9"}))
            assert who.structured_content["role"] == "grader"
            assert who.structured_content["session"] == "s9"

            # gateway-level rules: listing and calls follow them; hidden tools stay out
            assert "admin" not in [t.name for t in await client.list_tools()]
            out = await _rules(gw.url_for(""), "disable", {"role": "agent", "tools": ["read"]})
            assert out["disabled"] == ["admin", "read"]
            assert "read" not in [t.name for t in await client.list_tools()]
            denied = await client.call_tool("read")
            assert denied.structured_content["code"] == "permission_denied"
            await _rules(gw.url, "enable", {"role": "agent", "tools": ["read"]},
                         headers=gw.auth_headers)
            assert (await client.call_tool("read")).text == "read"

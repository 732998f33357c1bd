"""Env servers built the reference's FastMCP ways (``create_fastmcp_app``, an env's own app in
``self.mcp``, ``AgentEnvStarletteApplication``) serve the same wire as ours: the card, the
data plane (the whole conformance table), extensions, and tools that see who called.

The env runs as a process bound through MCP_HOST/MCP_PORT, as in an env image. This venv has
mcp 2.x (``MCPServer``); the Docker tier runs the same file on mcp 1.x (``FastMCP``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from dataplane_conformance import run_all
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agentenv_protocol import McpClient, ToolSession, ToolSessionError, fetch_card
from agentenv_protocol.testing import free_port, serve_gateway
from agentenv_protocol.wire import ROLE_META_KEY

# the env file the Docker tier builds into an image with mcp 1.x
ENV_FILE = Path(__file__).parents[1] / "mcp_env/bundles/testenvs/envs/notes/server.py"


async def _started(mode: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ENV_FILE), mode],
                            env={**os.environ, "MCP_HOST": "127.0.0.1", "MCP_PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                async with http.get(base + "/.well-known/agent-env.json") as r:
                    if r.status == 200:
                        return proc, base
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    proc.kill()
    raise AssertionError(proc.stderr.read().decode() if proc.stderr else "no server")


@pytest.fixture(params=["create", "own"])
async def notes(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, str]]:
    proc, base = await _started(request.param)
    try:
        yield request.param, base
    finally:
        proc.terminate()
        proc.wait(10)


async def test_card_and_tools_as_our_server_serves_them(notes: tuple[str, str]) -> None:
    mode, base = notes
    card = await fetch_card(base)
    assert card.name == "notes"
    assert card.tool_names == ["add_note", "whoami"]
    assert card.operations == ("data/reset", "data/add", "data/get")

    async with streamable_http_client(base + card.mcp_path) as (r, w), \
            ClientSession(r, w) as session:
        await session.initialize()
        listed = {t.name: t for t in (await session.list_tools()).tools}
        # the ToolContext parameter, and the app context that replaces it, are not wire input
        assert listed["add_note"].input_schema["properties"].keys() == {"text"}
        assert listed["add_note"].input_schema["properties"]["text"]["description"] \
            == "The note."
        assert ("count_notes" in listed) is (mode == "own")


async def test_tools_see_the_callers_role(notes: tuple[str, str]) -> None:
    mode, base = notes
    async with ToolSession(mcp_url=base + "/mcp", role="reviewer") as tools:
        assert (await tools.call_tool("add_note", {"text": "hi"})).text \
            == "reviewer kept 'hi' (1 notes)"
        assert (await tools.call_tool("whoami")).text == "reviewer"
        if mode == "own":
            assert (await tools.call_tool("count_notes")).text == "count_notes for reviewer"
        missing = await tools.call_tool("add_note", {})
        assert missing.isError
    # a gateway forwards the caller in _meta, which wins over the connection's header
    async with McpClient(base + "/mcp", headers={"AgentEnv-Role": "gateway"}) as client:
        assert (await client.call_tool("whoami", meta={ROLE_META_KEY: "judge"})).text == "judge"
        assert (await client.call_tool("whoami")).text == "gateway"


async def test_data_plane_conformance(notes: tuple[str, str]) -> None:
    await run_all(notes[1])


async def test_extension_routes_answer_as_ours(notes: tuple[str, str]) -> None:
    base = notes[1] + "/agentenv/ext/sync_time"
    async with aiohttp.ClientSession() as http:
        async with http.post(base, json={"env_get_time_url": "http://clock"}) as r:
            assert (r.status, await r.json()) == (200, {"ok": True, "url": "http://clock"})
        async with http.post(base, json={}) as r:
            body = await r.json()
            assert r.status == 400
            assert body["error"]["code"] == "invalid_params"
            assert "env_get_time_url" in body["error"]["message"]


async def test_behind_our_gateway(notes: tuple[str, str]) -> None:
    async with serve_gateway([notes[1]], call_timeout=5, ready_timeout=10) as gateway, \
            McpClient(gateway.mcp_url) as client:
        assert (await client.call_tool("add_note", {"text": "via"})).text \
            == "default kept 'via' (1 notes)"


async def test_a_session_that_cannot_open_says_so() -> None:
    with pytest.raises(ToolSessionError, match="initialize"):
        async with ToolSession(mcp_url=f"http://127.0.0.1:{free_port()}/mcp", timeout=2):
            pass


def test_starlette_app_serves_the_data_plane_and_refuses_tools() -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from agentenv_protocol import (
        AgentEnvEnvironment,
        AgentEnvStarletteApplication,
        EnvironmentCard,
        add_data,
        get_data,
        tool,
    )

    class Store(AgentEnvEnvironment):
        def __init__(self) -> None:
            self.parts: list = []

        @add_data
        def add(self, parts) -> None:
            self.parts.extend(parts)

        @get_data
        def get(self):
            return self.parts

    class WithTool(Store):
        @tool()
        def look(self) -> str:
            return "x"

    with pytest.raises(ValueError, match=r"@tool methods .*create_fastmcp_app"):
        AgentEnvStarletteApplication(EnvironmentCard(name="t"), WithTool())

    app = Starlette()
    AgentEnvStarletteApplication(EnvironmentCard(name="store"), Store()).add_routes_to_app(app)
    client = TestClient(app)
    assert client.get("/.well-known/agent-env.json").json()["name"] == "store"
    add = {"jsonrpc": "2.0", "id": 1, "method": "data/add",
           "params": {"parts": [{"kind": "text", "text": "a"}]}}
    assert client.post("/agentenv", json=add).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    got = client.post("/agentenv", json={"jsonrpc": "2.0", "id": 2, "method": "data/get"}).json()
    assert got["result"]["parts"][0]["text"] == "a"
    assert client.post("/agentenv", content=b"{").json()["error"]["code"] == -32700
    with pytest.raises(TypeError, match="AgentEnvEnvironment"):
        AgentEnvStarletteApplication(EnvironmentCard(name="x"), object())


def test_serve_takes_the_references_positional_transport() -> None:
    """``env.serve("stdio")`` (the reference's signature) is read as the transport, not a host;
    this server speaks streamable HTTP only, and says how to get another."""
    from agentenv_protocol import AgentEnvEnvironment

    with pytest.raises(ValueError, match=r"transport 'stdio': this server speaks "
                                         r"streamable-http; set self\.mcp"):
        AgentEnvEnvironment().serve("stdio")

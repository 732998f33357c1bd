"""The official ``mcp`` Python SDK client against our server and our gateway (capability URL,
no headers), with SSE replies and with JSON replies."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from reference_style_env import EchoEnv

from agentenv_protocol import McpClient
from agentenv_protocol.testing import RunningServer, serve_env, serve_gateway


@pytest.fixture(params=["sse", "json"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[RunningServer]:
    async with serve_env(EchoEnv(), prefer_json=request.param == "json") as srv:
        yield srv


@pytest.fixture(params=["sse", "json"])
async def gateway(server: RunningServer,
                  request: pytest.FixtureRequest) -> AsyncIterator[RunningServer]:
    async with serve_gateway([server.url], prefer_json=request.param == "json") as gw:
        yield gw


async def _exercise_with_official_client(url: str) -> None:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        init = await s.initialize()
        assert init.protocol_version == "2025-11-25"
        tools = await s.list_tools()
        by_name = {t.name: t for t in tools.tools}
        assert set(by_name) == {"echo", "echo_count", "fail_politely"}
        assert by_name["echo"].input_schema["properties"]["text"]["description"] == \
            "The text to send back."
        result = await s.call_tool("echo", {"text": "hello"})
        assert not result.is_error
        assert result.content[0].text == "hello"
        unknown = await s.call_tool("nope", {})
        assert unknown.is_error
        assert unknown.content[0].text == "Unknown tool: nope"
        failed = await s.call_tool("fail_politely", {"reason": "busy"})
        assert failed.is_error
        assert failed.content[0].text == "not_today: busy"
        assert failed.structured_content == {"code": "not_today", "message": "busy",
                                             "retryable": True, "applied": "no",
                                             "hint": "try tomorrow"}
        count = await s.call_tool("echo_count", {})
        assert count.content[0].text == "0"
        await s.send_ping()


async def test_official_client_direct(server: RunningServer) -> None:
    await _exercise_with_official_client(server.mcp_url)


async def test_official_client_through_gateway_capability_url(gateway: RunningServer) -> None:
    assert "/t/" in gateway.mcp_url
    await _exercise_with_official_client(gateway.mcp_url)


async def _exercise_with_our_client(url: str, headers: dict[str, str] | None = None) -> None:
    async with McpClient(url, headers=headers) as client:
        assert client.session_id
        assert [t.name for t in await client.list_tools()] == [
            "echo", "echo_count", "fail_politely"]
        result = await client.call_tool("echo", {"text": "hi"})
        assert (result.is_error, result.text) == (False, "hi")
        unknown = await client.call_tool("nope")
        assert unknown.is_error and unknown.text == "Unknown tool: nope"
        await client.ping()


async def test_our_client_direct(server: RunningServer) -> None:
    await _exercise_with_our_client(server.mcp_url)


async def test_our_client_through_gateway(gateway: RunningServer) -> None:
    await _exercise_with_our_client(gateway.mcp_url)
    await _exercise_with_our_client(gateway.url + "/mcp", gateway.auth_headers)


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
async def test_our_client_with_one_reply_kind(server: RunningServer, accept: str) -> None:
    async with McpClient(server.mcp_url, accept=accept) as client:
        assert (await client.call_tool("echo", {"text": accept})).text == accept


async def _streams_open(endpoint: Any) -> int:
    return sum(1 for s in endpoint.sessions.values() if s.stream_end is not None)


@pytest.mark.parametrize("through", ["direct", "gateway"])
async def test_official_client_holds_the_get_stream_open_and_closes_it(
        server: RunningServer, through: str) -> None:
    """The official client opens the session's GET SSE stream after initialize (it used to get
    405); it stays open for the session and ends with it."""
    from agentenv_protocol.gateway import GATEWAY_MCP_KEY
    from agentenv_protocol.server import MCP_KEY

    async with contextlib.AsyncExitStack() as stack:
        if through == "gateway":
            gw = await stack.enter_async_context(serve_gateway([server.url]))
            url, endpoint = gw.mcp_url, gw.app[GATEWAY_MCP_KEY]
        else:
            url, endpoint = server.mcp_url, server.app[MCP_KEY]
        async with streamable_http_client(url) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(100):
                if await _streams_open(endpoint):
                    break
                await asyncio.sleep(0.02)
            assert await _streams_open(endpoint) == 1
            assert (await session.call_tool("echo", {"text": "still"})).content[0].text == \
                "still"
        for _ in range(100):  # the client's DELETE ended the session and its stream
            if not await _streams_open(endpoint):
                break
            await asyncio.sleep(0.02)
        assert await _streams_open(endpoint) == 0

"""MCP streamable HTTP on the wire: negotiation, sessions, Accept, paging, errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.testing import RunningServer, serve_env

BOTH = "application/json, text/event-stream"


@environment_card(name="many")
class ManyToolsEnv(AgentEnvEnvironment):
    pass


for _i in range(5):
    def _make(i: int) -> Any:
        @tool(name=f"t{i}")
        def fn(self: Any) -> int:
            return i
        return fn
    setattr(ManyToolsEnv, f"t{_i}", _make(_i))


async def _post(url: str, body: Any, *, accept: str = BOTH, session: str | None = None,
                extra: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    headers = {"Accept": accept, "Content-Type": "application/json", **(extra or {})}
    if session:
        headers["Mcp-Session-Id"] = session
    data = body if isinstance(body, bytes) else json.dumps(body)
    async with aiohttp.ClientSession() as http, http.post(url, data=data, headers=headers) as r:
        raw = await r.read()
        ctype = r.headers.get("Content-Type", "")
        if ctype.startswith("text/event-stream"):
            text = raw.decode()
            assert text.startswith("event: message\ndata: ")
            payload = json.loads(text.split("data: ", 1)[1])
        else:
            payload = json.loads(raw) if raw else None
        return r.status, dict(r.headers), payload


async def _init(url: str, version: str = "2025-06-18") -> str:
    status, headers, _reply = await _post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                               "params": {"protocolVersion": version}})
    assert status == 200
    return headers["Mcp-Session-Id"]


@pytest.mark.parametrize(("asked", "answered"), [
    ("2025-03-26", "2025-03-26"), ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
    ("2099-01-01", "2025-11-25"), (None, "2025-11-25"),
])
async def test_version_negotiation(echo_server: RunningServer, asked: str | None,
                                   answered: str) -> None:
    status, headers, reply = await _post(echo_server.mcp_url, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": asked}})
    assert status == 200
    assert reply["result"]["protocolVersion"] == answered
    assert reply["result"]["serverInfo"]["name"] == "echo"
    assert headers["Mcp-Session-Id"]


@pytest.mark.parametrize(("accept", "ctype"), [
    ("application/json", "application/json"),
    ("text/event-stream", "text/event-stream"),
    (BOTH, "text/event-stream"),
    ("", "application/json"),
])
async def test_reply_kind_follows_accept(echo_server: RunningServer, accept: str,
                                         ctype: str) -> None:
    status, headers, _reply = await _post(echo_server.mcp_url, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, accept=accept)
    assert status == 200
    assert headers["Content-Type"].startswith(ctype)


async def test_json_preferred_when_configured() -> None:
    async with serve_env(ManyToolsEnv(), prefer_json=True) as srv:
        _, headers, _ = await _post(srv.mcp_url, {"jsonrpc": "2.0", "id": 1,
                                                  "method": "initialize", "params": {}})
        assert headers["Content-Type"].startswith("application/json")


async def test_not_acceptable(echo_server: RunningServer) -> None:
    status, _, _ = await _post(echo_server.mcp_url, {"jsonrpc": "2.0", "id": 1,
                                                     "method": "initialize"}, accept="text/html")
    assert status == 406


async def test_sessions_and_delete(echo_server: RunningServer) -> None:
    url = echo_server.mcp_url
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    status, _, reply = await _post(url, ping)
    assert status == 400 and reply["error"]["code"] == -32600
    status, _, reply = await _post(url, ping, session="not-a-session")
    assert status == 404
    sid = await _init(url)
    status, _, reply = await _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                                   session=sid)
    assert status == 202 and reply is None
    assert (await _post(url, ping, session=sid))[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    status, _, reply = await _post(url, ping, session=sid,
                                   extra={"MCP-Protocol-Version": "1999-01-01"})
    assert status == 400
    async with aiohttp.ClientSession() as http:
        async with http.get(url, headers={"Mcp-Session-Id": sid}) as r:
            assert r.status == 406  # the GET stream is SSE: Accept must say so
        sse = {"Mcp-Session-Id": sid, "Accept": "text/event-stream"}
        async with http.get(url, headers={"Accept": "text/event-stream"}) as r:
            assert r.status == 400
        async with http.get(url, headers={**sse, "Mcp-Session-Id": "nope"}) as r:
            assert r.status == 404
        async with http.get(url, headers=sse) as stream:
            assert stream.status == 200
            assert stream.headers["Content-Type"] == "text/event-stream"
            async with http.get(url, headers=sse) as second:
                assert second.status == 409  # one stream per session
            async with http.delete(url, headers={"Mcp-Session-Id": sid}) as r:
                assert r.status == 200
            # deleting the session ends its stream
            assert await asyncio.wait_for(stream.content.read(), 5) == b""
        async with http.delete(url, headers={"Mcp-Session-Id": sid}) as r:
            assert r.status == 404
    assert (await _post(url, ping, session=sid))[0] == 404


async def test_malformed_requests(echo_server: RunningServer) -> None:
    url = echo_server.mcp_url
    sid = await _init(url)
    status, _, reply = await _post(url, b"{nope", session=sid)
    assert (status, reply["error"]["code"], reply["id"]) == (400, -32700, None)
    status, _, reply = await _post(url, [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
                                   session=sid)
    assert (status, reply["error"]["code"]) == (400, -32600)
    status, _, reply = await _post(url, {"id": 1, "method": "ping"}, session=sid)
    assert (status, reply["error"]["code"]) == (400, -32600)
    status, _, reply = await _post(url, {"jsonrpc": "2.0", "id": 9, "method": "resources/list"},
                                   session=sid)
    assert (status, reply["error"]["code"], reply["id"]) == (200, -32601, 9)
    status, _, reply = await _post(url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                         "params": {"name": 3}}, session=sid)
    assert reply["error"]["code"] == -32602
    status, _, reply = await _post(url, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                         "params": {"name": "echo", "arguments": {}}},
                                   session=sid)
    assert reply["result"]["isError"] is True
    assert "missing parameter: text" in reply["result"]["content"][0]["text"]


async def test_tools_list_paging() -> None:
    async with serve_env(ManyToolsEnv(), page_size=2) as srv:
        sid = await _init(srv.mcp_url)
        names: list[str] = []
        cursor = None
        pages = 0
        while True:
            params = {"cursor": cursor} if cursor else {}
            _, _, reply = await _post(srv.mcp_url, {"jsonrpc": "2.0", "id": 1,
                                                    "method": "tools/list", "params": params},
                                      session=sid)
            pages += 1
            names += [t["name"] for t in reply["result"]["tools"]]
            cursor = reply["result"].get("nextCursor")
            if not cursor:
                break
        assert (pages, sorted(names)) == (3, ["t0", "t1", "t2", "t3", "t4"])
        _, _, reply = await _post(srv.mcp_url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                                "params": {"cursor": "garbage"}}, session=sid)
        assert reply["error"]["code"] == -32602

"""The data plane (protocol.md section 3): conformance against our server and our gateway,
plus the handler-failure rows that need a purpose-built env."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import dataplane_conformance as conformance
import pytest

from agentenv_protocol import (
    AgentEnvEnvironment,
    DataPart,
    DataPlaneClient,
    ProtocolError,
    TextPart,
    add_data,
    environment_card,
    get_data,
    reset_data,
)
from agentenv_protocol.testing import RunningServer, serve_env


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__)
async def test_conformance_against_our_server(echo_server: RunningServer, check: Any) -> None:
    await check(echo_server.url)


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__)
async def test_conformance_against_our_gateway(echo_gateway: RunningServer, check: Any) -> None:
    await check(echo_gateway.url, echo_gateway.auth_headers)


async def test_conformance_through_capability_url(echo_gateway: RunningServer) -> None:
    await conformance.run_all(echo_gateway.url_for(""))


@environment_card(name="broken")
class BrokenEnv(AgentEnvEnvironment):
    @reset_data
    def reset(self) -> None:
        raise RuntimeError("cannot reset now")

    @add_data
    async def add(self, parts: list) -> None:
        raise ValueError("disk full")

    @get_data
    async def get(self) -> list:
        raise KeyError("gone")


@environment_card(name="reset-only")
class ResetOnlyEnv(AgentEnvEnvironment):
    @reset_data
    def reset(self) -> None:
        pass


async def _rpc(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
            url + "/agentenv", data=body if isinstance(body, bytes) else json.dumps(body)) as r:
        return r.status, json.loads(await r.read())


@pytest.mark.parametrize(("method", "params", "message", "code"), [
    ("data/reset", {}, "cannot reset now", "reset_failed"),
    ("data/add", {"parts": [{"kind": "text", "text": "x"}]}, "disk full", "add_failed"),
    ("data/get", {}, "'gone'", "get_failed"),
])
async def test_handler_failures_are_32000(method: str, params: dict, message: str,
                                          code: str) -> None:
    async with serve_env(BrokenEnv()) as server:
        status, reply = await _rpc(server.url, {"jsonrpc": "2.0", "id": 5, "method": method,
                                                "params": params})
    assert status == 200
    assert reply == {"jsonrpc": "2.0", "id": 5,
                     "error": {"code": -32000, "message": message, "data": {"code": code}}}


async def test_error_table_exact() -> None:
    """Every row of the section 3 table, with the exact message and id."""
    async with serve_env(ResetOnlyEnv()) as server:
        assert await _rpc(server.url, b"nope") == (200, {
            "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
        assert await _rpc(server.url, {"jsonrpc": "2.0", "id": 3}) == (200, {
            "jsonrpc": "2.0", "id": 3, "error": {"code": -32600, "message": "invalid request"}})
        assert await _rpc(server.url, {"jsonrpc": "2.0", "id": 4, "method": "data/add",
                                       "params": {"parts": []}}) == (200, {
            "jsonrpc": "2.0", "id": 4,
            "error": {"code": -32601, "message": "method not found: data/add"}})
        assert await _rpc(server.url, {"jsonrpc": "2.0", "id": 6, "method": "data/reset"}) == (
            200, {"jsonrpc": "2.0", "id": 6, "result": {}})
        async with aiohttp.ClientSession() as http, http.get(
                server.url + "/.well-known/agent-env.json") as r:
            card = await r.json()
        assert card["capabilities"]["operations"] == ["data/reset"]
        assert card["capabilities"]["tools"] is None
        assert card["children_environments"] is None


async def test_empty_parts_detail(echo_server: RunningServer) -> None:
    status, reply = await _rpc(echo_server.url, {"jsonrpc": "2.0", "id": 1, "method": "data/add",
                                                 "params": {"parts": []}})
    assert status == 200
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == "invalid_request"
    assert "at least one part" in reply["error"]["data"]["detail"]


async def test_client_round_trip(echo_server: RunningServer) -> None:
    async with DataPlaneClient(echo_server.url) as client:
        await client.reset()
        await client.add([TextPart("a"), DataPart({"x": 1}), {"kind": "text", "text": "b"}])
        assert await client.get() == [TextPart("a"), DataPart({"x": 1}), TextPart("b")]
        with pytest.raises(ProtocolError) as info:
            await client.add([])
        assert info.value.code == -32602
        await client.reset()
        assert await client.get() == []


async def test_body_over_cap_is_413() -> None:
    async with serve_env(ResetOnlyEnv(), max_body_bytes=1024) as server:
        async with aiohttp.ClientSession() as http:
            async with http.post(server.url + "/agentenv", data=b"x" * 4096) as r:
                assert r.status == 413
            async with http.post(server.url + "/mcp", data=b"x" * 4096) as r:
                assert r.status == 413

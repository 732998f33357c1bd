"""The gateway: token auth, flat namespace and clashes, trajectory, failures and reconnects,
modes, clock/v1, the composed card and the pass-through to children."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import aiohttp
import pytest

from agentenv_protocol import (
    AgentEnvEnvironment,
    McpClient,
    environment_card,
    extension,
    tool,
)
from agentenv_protocol.errors import TransportError
from agentenv_protocol.testing import (
    RunningServer,
    free_port,
    serve_env,
    serve_gateway,
    start_app,
)


@environment_card(name="slow")
class SlowEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.active = 0
        self.max_active = 0
        self.time_url: str | None = None

    @tool(name="nap")
    async def nap(self, seconds: float) -> str:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.active -= 1
        return "rested"

    @tool(name="echo")
    def echo(self, text: str) -> str:
        return text

    @extension("urn:agentenv:clock/v1")
    def sync_time(self, env_get_time_url: str) -> None:
        self.time_url = env_get_time_url


@environment_card(name="other")
class OtherEnv(AgentEnvEnvironment):
    @tool(name="echo")
    def echo(self, text: str) -> str:
        return "other:" + text

    @tool(name="only_other")
    def only_other(self) -> str:
        return "mine"


async def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as r:
        return r.status, await r.read()


# -- authentication ------------------------------------------------------------------------
async def test_token_required_everywhere(echo_gateway: RunningServer) -> None:
    gw = echo_gateway
    good = {"Authorization": f"Bearer {gw.token}"}
    for path in ("/mcp", "/state", "/trajectory", "/ready", "/.well-known/agent-env.json",
                 "/clock/state", "/env/echo/.well-known/agent-env.json", "/nope"):
        assert await _get(gw.url + path) == (401, b""), path
        assert (await _get(gw.url + path, {"Authorization": "Bearer wrong"}))[0] == 401
        assert (await _get(gw.url + path, {"Authorization": gw.token or ""}))[0] == 401
        assert (await _get(f"{gw.url}/t/wrong{path}"))[0] == 401
    assert (await _get(gw.url + "/state", good))[0] == 200
    assert (await _get(gw.url_for("/state")))[0] == 200
    assert (await _get(gw.url_for("/no/such/route")))[0] == 404
    async with aiohttp.ClientSession() as http, http.post(
            gw.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize"}) as r:
        assert r.status == 401
    with pytest.raises(TransportError) as refused:  # a client without the token
        async with McpClient(gw.url + "/mcp"):
            pass
    assert refused.value.status == 401


async def test_gateway_body_cap(echo_server: RunningServer) -> None:
    async with serve_gateway([echo_server.url], max_body_bytes=2048) as gw:
        async with aiohttp.ClientSession() as http, http.post(
                gw.url_for("/mcp"), data=b"x" * 10000,
                headers={"Content-Type": "application/json"}) as r:
            assert r.status == 413


# -- namespace -----------------------------------------------------------------------------
async def test_clash_serves_neither_and_stays_unready() -> None:
    async with serve_env(SlowEnv()) as a, serve_env(OtherEnv()) as b, \
            serve_gateway([a.url, b.url]) as gw:
        status, body = await _get(gw.url_for("/ready"))
        assert status == 503
        assert json.loads(body)["clashes"] == {"echo": ["slow", "other"]}
        state = json.loads((await _get(gw.url_for("/state")))[1])
        assert state["clashes"] == {"echo": ["slow", "other"]}
        assert state["ready"] is False
        async with McpClient(gw.mcp_url) as client:
            names = [t.name for t in await client.list_tools()]
            assert "echo" not in names and {"nap", "only_other"} <= set(names)
            clash = await client.call_tool("echo", {"text": "x"})
            assert clash.is_error and "several environments" in clash.text
            assert (await client.call_tool("only_other")).text == "mine"


async def test_composed_card_and_passthrough() -> None:
    async with serve_env(SlowEnv()) as a, serve_env(OtherEnv()) as b:
        async with serve_gateway([a.url, b.url]) as gw:
            card = json.loads((await _get(gw.url_for("/.well-known/agent-env.json")))[1])
            children = {c["name"]: c for c in card["children_environments"]}
            assert set(children) == {"slow", "other"}
            assert children["slow"]["url"] == "/env/slow/agentenv"
            assert children["slow"]["additionalInterfaces"] == [
                {"url": "/env/slow/mcp", "transport": "mcp"}]
            ext = children["slow"]["capabilities"]["extensions"][0]
            assert ext["params"]["endpoint"] == "/env/slow/agentenv/ext/sync_time"
            assert card["capabilities"]["extensions"][0]["uri"] == "urn:agentenv:clock/v1"
            # the child's own card, through the gateway
            status, body = await _get(gw.url_for("/env/other/.well-known/agent-env.json"))
            assert status == 200 and json.loads(body)["name"] == "other"
            # a child's MCP endpoint is reachable under the rewritten path too
            async with McpClient(gw.url_for("/env/other/mcp")) as client:
                assert (await client.call_tool("echo", {"text": "x"})).text == "other:x"


async def test_an_aside_is_reached_only_through_its_path() -> None:
    """``--aside NAME=URL`` (the env state's db-mcp): its tools stay out of the namespace and
    the card, its calls leave no trajectory, and ``/env/NAME/...`` reaches it with the token."""
    async with serve_env(SlowEnv()) as a, serve_env(OtherEnv()) as b:
        async with serve_gateway([a.url], asides={"db": b.url}) as gw:
            async with McpClient(gw.mcp_url) as client:
                assert "only_other" not in {t.name for t in await client.list_tools()}
            card = json.loads((await _get(gw.url_for("/.well-known/agent-env.json")))[1])
            assert [c["name"] for c in card["children_environments"]] == ["slow"]
            async with McpClient(gw.url_for("/env/db/mcp")) as client:
                assert (await client.call_tool("only_other")).text == "mine"
            assert (await _get(f"{gw.url}/env/db/mcp"))[0] == 401
            assert (await _get(gw.url_for("/env/nope/mcp")))[0] == 404
            status, body = await _get(gw.url_for("/trajectory"))
            assert status == 200 and b"only_other" not in body


# -- trajectory ----------------------------------------------------------------------------
async def test_trajectory_pages_by_cursor_and_clears(echo_gateway: RunningServer) -> None:
    async def page(query: str) -> tuple[int, list[dict[str, Any]], Any]:
        async with aiohttp.ClientSession(headers=echo_gateway.auth_headers) as http, \
                http.get(f"{echo_gateway.url}/trajectory{query}") as resp:
            body = await resp.text()
            lines = [json.loads(line) for line in body.splitlines()] if resp.status == 200 \
                else body
            return resp.status, lines, resp.headers

    async with McpClient(echo_gateway.mcp_url) as client:
        for text in ("a", "b", "c"):
            await client.call_tool("echo", {"text": text})
    status, first, headers = await page("?limit=4")
    assert status == 200 and [e["event_id"] for e in first] == [f"evt-{n}" for n in (1, 2, 3, 4)]
    assert (headers["AgentEnv-Trajectory-Has-More"], headers["AgentEnv-Trajectory-Last-Id"],
            headers["AgentEnv-Trajectory-Events"]) == ("true", "evt-4", "6")
    _, rest, headers = await page("?after=evt-4&limit=4")
    assert [e["event_id"] for e in rest] == ["evt-5", "evt-6"]
    assert headers["AgentEnv-Trajectory-Has-More"] == "false"
    _, none, headers = await page("?after=evt-6")
    assert none == [] and "AgentEnv-Trajectory-Last-Id" not in headers
    for bad in ("?after=6", "?after=evt-1&offset=0", "?limit=-1"):
        assert (await page(bad))[0] == 400, bad
    async with aiohttp.ClientSession(headers=echo_gateway.auth_headers) as http, \
            http.post(f"{echo_gateway.url}/trajectory/clear") as resp:
        assert (resp.status, await resp.json()) == (200, {"ok": True, "cleared": 6})
    assert (await page(""))[1] == []
    async with McpClient(echo_gateway.mcp_url) as client:
        await client.call_tool("echo", {"text": "d"})
    _, after_clear, _ = await page("?after=evt-6")  # a cursor from before the clear holds
    assert [e["event_id"] for e in after_clear] == ["evt-7", "evt-8"]
    assert after_clear[0]["arguments"] == {"text": "d"}


async def test_trajectory_events(echo_gateway: RunningServer) -> None:
    async with McpClient(echo_gateway.mcp_url, headers={"AgentEnv-Role": "agent"}) as client:
        await client.call_tool("echo", {"text": "one"})
        await client.call_tool("nope")
    status, body = await _get(echo_gateway.url_for("/trajectory"))
    assert status == 200
    events = [json.loads(line) for line in body.decode().splitlines()]
    assert [e["type"] for e in events] == ["tool_call", "tool_call_result",
                                           "tool_call", "tool_call_failed"]
    for e in events:
        assert {"event_id", "timestamp_utc", "role", "duration_ms", "tool", "call_id"} <= set(e)
        assert e["role"] == "agent"
        assert e["timestamp_utc"].endswith("+00:00")
    assert len({e["event_id"] for e in events}) == 4
    assert events[0]["arguments"] == {"text": "one"}
    assert events[1]["call_id"] == events[0]["call_id"]
    assert events[1]["result"]["content"][0]["text"] == "one"
    assert events[1]["duration_ms"] >= 0


# -- failures ------------------------------------------------------------------------------
async def test_slow_then_dead_then_restarted_child() -> None:
    env = SlowEnv()
    from agentenv_protocol.server import create_app

    child = await start_app(create_app(env))
    port = child.port
    try:
        async with serve_gateway([child.url], call_timeout=0.5) as gw:
            async with McpClient(gw.mcp_url) as client:
                started = time.monotonic()
                slow = await client.call_tool("nap", {"seconds": 3})
                assert time.monotonic() - started < 2
                assert slow.is_error
                assert slow.structured_content["code"] == "env_timeout"
                assert "slow" in slow.text and "nap" in slow.text

                await child.close()
                dead = await client.call_tool("echo", {"text": "x"})
                assert dead.is_error
                assert dead.structured_content["code"] == "env_unavailable"
                assert (await _get(gw.url_for("/state")))[0] == 200  # the gateway stays up

                child = await start_app(create_app(SlowEnv()), port=port)
                result = await client.call_tool("echo", {"text": "back"})
                if result.is_error:  # one stale pooled connection may still fail once
                    result = await client.call_tool("echo", {"text": "back"})
                assert (result.is_error, result.text) == (False, "back")
            _status, body = await _get(gw.url_for("/trajectory"))
            kinds = [json.loads(line)["type"] for line in body.decode().splitlines()]
            assert kinds.count("tool_call_failed") >= 2
    finally:
        await child.close()


async def test_child_not_ready_keeps_gateway_unready() -> None:
    port = free_port()
    async with serve_gateway([f"http://127.0.0.1:{port}"], ready_timeout=0.3,
                             settle_timeout=3) as gw:
        status, _body = await _get(gw.url_for("/ready"))
        assert status == 503
        state = json.loads((await _get(gw.url_for("/state")))[1])
        assert "not ready" in state["children"][0]["error"]


# -- modes ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "expected_max"), [("performance", 4), ("consistent", 1)])
async def test_modes(mode: str, expected_max: int) -> None:
    env = SlowEnv()
    async with serve_env(env) as child, serve_gateway([child.url], mode=mode) as gw:
        clients = [McpClient(gw.mcp_url) for _ in range(4)]
        for c in clients:
            await c.connect()
        await asyncio.gather(*(c.call_tool("nap", {"seconds": 0.1}) for c in clients))
        for c in clients:
            await c.close()
        assert env.max_active == expected_max
        state = json.loads((await _get(gw.url_for("/state")))[1])
        assert state["mode"] == mode


# -- clock/v1 ------------------------------------------------------------------------------
async def test_clock() -> None:
    env = SlowEnv()
    async with serve_env(env) as child, serve_gateway([child.url]) as gw:
        async with aiohttp.ClientSession() as http:
            async with http.get(gw.url_for("/clock/time")) as r:
                assert r.status == 404
            async with http.put(gw.url_for("/clock/set-time"),
                                json={"virtual_time": "2030-01-01T00:00:00Z",
                                      "virtual_seconds_per_real_second": 3600}) as r:
                assert r.status == 200
                body = await r.json()
                assert body["armed"] is True and body["synced"] == ["slow"]
            assert env.time_url == gw.url_for("/clock/time")
            await asyncio.sleep(0.05)
            async with http.get(gw.url_for("/clock/time")) as r:
                vt = (await r.json())["virtual_time"]
                assert vt > "2030-01-01T00:00:30" and vt.startswith("2030-01-01T")
            async with http.get(gw.url_for("/clock/state")) as r:
                state = await r.json()
                assert set(state) == {"armed", "t0", "virtual_seconds_per_real_second",
                                      "virtual_time", "env_get_time_url"}
                assert state["virtual_seconds_per_real_second"] == 3600
            async with McpClient(gw.mcp_url) as client:
                assert "get_time" in [t.name for t in await client.list_tools()]
                got = await client.call_tool("get_time", {"time_zone": "Asia/Tokyo"})
                assert got.structured_content["virtual_time"].startswith("2030-01-01T09:")
            for bad in ({"virtual_time": "yesterday"},
                        {"virtual_time": "2030-01-01T00:00:00Z",
                         "virtual_seconds_per_real_second": 100000}):
                async with http.put(gw.url_for("/clock/set-time"), json=bad) as r:
                    assert r.status == 400
            async with http.post(gw.url_for("/clock/clear")) as r:
                assert await r.json() == {"ok": True, "armed": False}
            async with http.get(gw.url_for("/clock/time")) as r:
                assert r.status == 404
            async with McpClient(gw.mcp_url) as client:
                assert "get_time" not in [t.name for t in await client.list_tools()]


# -- the command line ----------------------------------------------------------------------
async def test_cli_runs_gateway(echo_server: RunningServer) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenv_protocol.gateway", "--child", echo_server.url,
         "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "AGENTENV_GATEWAY_TOKEN": "s3cret"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        status = 0
        while time.monotonic() < deadline:
            try:
                status, _ = await _get(base + "/t/s3cret/ready")
                if status == 200:
                    break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
        assert status == 200
        assert (await _get(base + "/ready"))[0] == 401
        async with McpClient(base + "/t/s3cret/mcp") as client:
            assert (await client.call_tool("echo", {"text": "cli"})).text == "cli"
    finally:
        proc.terminate()
        proc.wait(10)


def test_cli_documents_itself() -> None:
    out = subprocess.run([sys.executable, "-m", "agentenv_protocol.gateway", "--help"],
                         capture_output=True, text=True, check=True).stdout
    for flag in ("--child", "--port", "--host", "--token", "--mode"):
        assert flag in out
    import agentenv_protocol.gateway as gateway_module

    doc: Any = gateway_module.__doc__
    assert "/t/<token>/mcp" in doc and "AGENTENV_GATEWAY_TOKEN" in doc

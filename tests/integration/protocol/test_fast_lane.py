"""The fast lane (``agentenv_protocol.fast_lane``): plain ``POST /mcp`` answered without
aiohttp's request machinery, on real servers over raw sockets.

What a user would notice if it were wrong: a reply that differs from aiohttp's, a request it
should not take (chunked, wrong token, another path) answered badly, a keep-alive connection cut
while in use or never closed, a slow client holding a connection. The lane's counters show
which side answered, so each test knows it exercised the lane (or the hand-over).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from reference_style_env import EchoEnv

from agentenv_protocol.fast_lane import FastLane
from agentenv_protocol.guard import GUARD_KEY, Limits
from agentenv_protocol.testing import RunningServer, serve_env, serve_gateway

ACCEPT_BOTH = b"application/json, text/event-stream"


def lane_of(server: RunningServer) -> FastLane:
    lane = server.app[GUARD_KEY].lane
    assert lane is not None
    return lane


class Conn:
    """One raw keep-alive connection: write bytes, read whole HTTP/1.1 replies."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, server: RunningServer) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", server.port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def reply(self, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), timeout)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                body += chunk[:-2]
        else:
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, headers, body

    async def closed(self, timeout: float = 5) -> bool:
        try:
            return await asyncio.wait_for(self.reader.read(1), timeout) == b""
        except ConnectionError:
            return True

    def close(self) -> None:
        self.writer.close()


def post(path: str, body: bytes, *headers: tuple[str, bytes], close: bool = False) -> bytes:
    lines = [f"POST {path} HTTP/1.1".encode(), b"Host: 127.0.0.1",
             b"Content-Type: application/json", f"Content-Length: {len(body)}".encode()]
    lines += [name.encode() + b": " + value for name, value in headers]
    if close:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def rpc(method: str, params: dict[str, Any] | None = None, msg_id: Any = 1) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if msg_id is not None:
        msg["id"] = msg_id
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode()


INIT = rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "raw", "version": "1"}})


async def session(server: RunningServer, path: str) -> str:
    conn = await Conn.open(server)
    await conn.send(post(path, INIT, ("Accept", ACCEPT_BOTH), close=True))
    status, headers, _ = await conn.reply()
    conn.close()
    assert status == 200
    return headers["mcp-session-id"]


@pytest.fixture
async def gateways(echo_server: RunningServer) -> AsyncIterator[tuple[RunningServer, ...]]:
    """Two gateways over one env server, with the lane and without it."""
    async with serve_gateway([echo_server.url], call_timeout=5, ready_timeout=10) as fast, \
            serve_gateway([echo_server.url], call_timeout=5, ready_timeout=10,
                          fast_lane=False) as plain:
        yield fast, plain


# Each case: a body and headers (``SID`` stands for the session's id); every reply is compared.
SID = b"<sid>"
CASES: dict[str, tuple[bytes, list[tuple[str, bytes]]]] = {
    "tools/call json": (rpc("tools/call", {"name": "echo", "arguments": {"text": "hé"}}),
                        [("Accept", b"application/json"), ("Mcp-Session-Id", SID)]),
    "tools/call sse": (rpc("tools/call", {"name": "echo", "arguments": {"text": "x"}}, 7),
                       [("Accept", ACCEPT_BOTH), ("Mcp-Session-Id", SID)]),
    "unknown tool": (rpc("tools/call", {"name": "nope", "arguments": {}}),
                     [("Accept", b"application/json"), ("Mcp-Session-Id", SID)]),
    "tools/list": (rpc("tools/list"), [("Accept", b"application/json"), ("Mcp-Session-Id", SID)]),
    "ping": (rpc("ping"), [("Accept", b"application/json"), ("Mcp-Session-Id", SID)]),
    "notification": (rpc("notifications/initialized", msg_id=None),
                     [("Accept", ACCEPT_BOTH), ("Mcp-Session-Id", SID)]),
    "not JSON": (b"{", [("Accept", b"application/json"), ("Mcp-Session-Id", SID)]),
    "batch": (b"[" + rpc("ping") + b"]", [("Accept", b"application/json")]),
    "not acceptable": (rpc("ping"), [("Accept", b"text/plain"), ("Mcp-Session-Id", SID)]),
    "no session": (rpc("ping"), [("Accept", b"application/json")]),
    "unknown session": (rpc("ping"), [("Accept", b"application/json"),
                                      ("Mcp-Session-Id", b"feedbeef")]),
    "bad params": (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}',
                   [("Accept", b"application/json"), ("Mcp-Session-Id", SID)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_lane_answers_as_aiohttp_does(gateways: tuple[RunningServer, ...],
                                               case: str) -> None:
    body, headers = CASES[case]
    seen = []
    for gateway in gateways:
        path = f"/t/{gateway.token}/mcp"
        sid = (await session(gateway, path)).encode()
        conn = await Conn.open(gateway)
        await conn.send(post(path, body, *[(n, sid if v == SID else v) for n, v in headers],
                             close=True))
        status, got, reply = await conn.reply()
        conn.close()
        seen.append((status, got.get("content-type"), reply))
    assert seen[0] == seen[1]
    fast, plain = gateways
    assert lane_of(fast).served >= 2  # initialize and the case itself
    assert plain.app[GUARD_KEY].lane is None


async def test_a_plain_call_is_served_by_the_lane_on_env_servers_too(
        echo_server: RunningServer) -> None:
    lane = lane_of(echo_server)
    sid = (await session(echo_server, "/mcp")).encode()
    conn = await Conn.open(echo_server)
    before = lane.served
    for n in range(3):
        await conn.send(post("/mcp", rpc("tools/call", {"name": "echo",
                                                        "arguments": {"text": f"t{n}"}}, n),
                             ("Accept", b"application/json"), ("Mcp-Session-Id", sid)))
        status, _, reply = await conn.reply()
        assert status == 200
        assert json.loads(reply)["result"]["content"][0]["text"] == f"t{n}"
    conn.close()
    assert lane.served == before + 3
    assert lane.handed_over == 0


async def test_what_the_lane_does_not_take_goes_to_aiohttp_for_good(
        gateways: tuple[RunningServer, ...]) -> None:
    gateway = gateways[0]
    lane = lane_of(gateway)
    path = f"/t/{gateway.token}/mcp"
    sid = (await session(gateway, path)).encode()
    call = rpc("tools/call", {"name": "echo", "arguments": {"text": "one"}})
    conn = await Conn.open(gateway)
    await conn.send(post(path, call, ("Accept", b"application/json"), ("Mcp-Session-Id", sid)))
    assert (await conn.reply())[0] == 200
    served = lane.served
    # another route on the same connection: aiohttp answers it, and everything after it
    await conn.send(f"GET /t/{gateway.token}/ready HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    status, _, body = await conn.reply()
    assert status == 200 and json.loads(body)["ready"] is True
    await conn.send(post(path, call, ("Accept", b"application/json"), ("Mcp-Session-Id", sid)))
    status, _, body = await conn.reply()
    assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "one"
    assert lane.served == served
    assert lane.handed_over == 1
    conn.close()

    # a chunked body is aiohttp's to read
    conn = await Conn.open(gateway)
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
            f"Mcp-Session-Id: {sid.decode()}\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    await conn.send(head + b"%x\r\n" % len(call) + call + b"\r\n0\r\n\r\n")
    status, _, body = await conn.reply()
    assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "one"
    assert lane.handed_over == 2
    conn.close()


@pytest.mark.parametrize("how", ["path", "header", "no token"])
async def test_a_wrong_token_gets_aiohttps_401_and_the_connection_closes(
        gateways: tuple[RunningServer, ...], how: str) -> None:
    gateway = gateways[0]
    lane = lane_of(gateway)
    served = lane.served
    path = "/t/not-the-token/mcp" if how == "path" else "/mcp"
    extra = [("Authorization", b"Bearer not-the-token")] if how == "header" else []
    conn = await Conn.open(gateway)
    await conn.send(post(path, rpc("ping"), ("Accept", b"application/json"), *extra))
    status, headers, _ = await conn.reply()
    assert status == 401 and headers.get("www-authenticate") == "Bearer"
    assert await conn.closed()
    assert lane.served == served


async def test_pipelined_requests_are_answered_in_order(
        gateways: tuple[RunningServer, ...]) -> None:
    gateway = gateways[0]
    path = f"/t/{gateway.token}/mcp"
    sid = (await session(gateway, path)).encode()
    conn = await Conn.open(gateway)
    await conn.send(b"".join(
        post(path, rpc("tools/call", {"name": "echo", "arguments": {"text": f"p{n}"}}, n),
             ("Accept", b"application/json"), ("Mcp-Session-Id", sid)) for n in range(5)))
    for n in range(5):
        status, _, body = await conn.reply()
        reply = json.loads(body)
        assert (status, reply["id"], reply["result"]["content"][0]["text"]) == (200, n, f"p{n}")
    conn.close()


async def test_connection_close_is_honoured(gateways: tuple[RunningServer, ...]) -> None:
    gateway = gateways[0]
    served = lane_of(gateway).served
    conn = await Conn.open(gateway)
    await conn.send(post(f"/t/{gateway.token}/mcp", INIT, ("Accept", b"application/json"),
                         close=True))
    status, headers, _ = await conn.reply()
    assert status == 200 and headers.get("connection") == "close"
    assert await conn.closed()
    assert lane_of(gateway).served == served + 1


async def test_a_connection_in_use_stays_and_an_idle_one_closes(
        echo_server: RunningServer) -> None:
    limits = Limits(keepalive_timeout=0.6, header_timeout=0.5)
    async with serve_gateway([echo_server.url], call_timeout=5, ready_timeout=10,
                             limits=limits) as gateway:
        path = f"/t/{gateway.token}/mcp"
        sid = (await session(gateway, path)).encode()
        conn = await Conn.open(gateway)
        started = time.monotonic()
        while time.monotonic() - started < 1.5:  # well past the keep-alive timeout, never idle
            await asyncio.sleep(0.2)
            await conn.send(post(path, rpc("ping"), ("Accept", b"application/json"),
                                 ("Mcp-Session-Id", sid)))
            assert (await conn.reply())[0] == 200
        idle_from = time.monotonic()
        assert await conn.closed(timeout=3)
        assert 0.5 < time.monotonic() - idle_from < 2.0
        assert lane_of(gateway).handed_over == 0


async def test_a_slow_head_gets_408_and_a_late_body_is_still_read(
        echo_server: RunningServer) -> None:
    limits = Limits(header_timeout=0.5, body_timeout=5)
    async with serve_gateway([echo_server.url], call_timeout=5, ready_timeout=10,
                             limits=limits) as gateway:
        path = f"/t/{gateway.token}/mcp"
        conn = await Conn.open(gateway)
        await conn.send(f"POST {path} HTTP/1.1\r\nHost: x\r\n".encode())
        status, _, body = await conn.reply(timeout=3)
        assert status == 408 and b"not sent in time" in body
        assert await conn.closed()

        sid = (await session(gateway, path)).encode()
        whole = post(path, rpc("tools/call", {"name": "echo", "arguments": {"text": "late"}}),
                     ("Accept", b"application/json"), ("Mcp-Session-Id", sid))
        conn = await Conn.open(gateway)
        await conn.send(whole[:-10])
        await asyncio.sleep(0.8)  # past the head deadline: aiohttp takes the body over
        await conn.send(whole[-10:])
        status, _, body = await conn.reply()
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "late"
        assert lane_of(gateway).handed_over == 1
        conn.close()


async def test_a_body_over_the_apps_cap_gets_aiohttps_413() -> None:
    async with serve_env(EchoEnv(), max_body_bytes=1000) as server:
        big = rpc("tools/call", {"name": "echo", "arguments": {"text": "x" * 2000}})
        conn = await Conn.open(server)
        await conn.send(post("/mcp", big, ("Accept", b"application/json")))
        status, _, _ = await conn.reply()
        assert status == 413
        assert lane_of(server).handed_over == 1
        conn.close()

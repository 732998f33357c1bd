"""Gateway exhaustion: half-open connections, a connection flood, a trajectory that grows memory.

The gateway runs as its own process (``python -m agentenv_protocol.gateway``, as in the image)
over a real env server; clients are raw sockets and aiohttp, so every byte crosses real TCP.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import attrs
import pytest

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.client import McpClient
from agentenv_protocol.testing import RunningServer, serve_env

TOKEN = "hostile-test-token"


@environment_card(name="payload")
class PayloadEnv(AgentEnvEnvironment):
    @tool(name="echo")
    def echo(self, text: str) -> str:
        """Send the text back (big texts make big trajectory events)."""
        return text


@attrs.frozen
class GatewayProcess:
    url: str
    process: subprocess.Popen[bytes]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def rss_kib(self) -> int:
        """The gateway process's resident memory (KiB), from /proc."""
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def log(self) -> str:
        """Everything the gateway wrote to stderr (after it stopped)."""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode("utf-8", "replace")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def env_server() -> AsyncIterator[RunningServer]:
    async with serve_env(PayloadEnv()) as server:
        yield server


def start_gateway(child: str, *extra: str) -> GatewayProcess:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentenv_protocol.gateway", "--child", child,
         "--host", "127.0.0.1", "--port", str(port), *extra],
        env={**os.environ, "AGENTENV_GATEWAY_TOKEN": TOKEN},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return GatewayProcess(f"http://127.0.0.1:{port}", process)


async def wait_ready(gateway: GatewayProcess) -> None:
    deadline = time.monotonic() + 20
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(f"{gateway.url}/t/{TOKEN}/ready") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the gateway did not become ready")


@pytest.fixture
async def gateway(env_server: RunningServer) -> AsyncIterator[GatewayProcess]:
    process = start_gateway(env_server.url, "--header-timeout", "1", "--body-timeout", "1",
                            "--max-pending-per-client", "16")
    try:
        await wait_ready(process)
        yield process
    finally:
        process.process.terminate()
        process.process.wait(10)


def _partial(port: int, head: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head)
    return sock


def _closed_by_server(sock: socket.socket, wait: float) -> bytes | None:
    """What the server sent before closing (b"" = closed silently), or None if still open."""
    sock.settimeout(wait)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
        return data
    except TimeoutError:
        return None  # still open (whatever it sent)
    except ConnectionResetError:
        return b""


@pytest.fixture
def partial_sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


async def test_half_open_requests_are_timed_out_and_a_flood_does_not_lock_out_the_token(
    gateway: GatewayProcess, partial_sockets: list[socket.socket],
) -> None:
    # 300 unauthenticated partial requests: heads that never end.
    started = time.monotonic()
    for _ in range(300):
        partial_sockets.append(_partial(gateway.port, b"POST /mcp HTTP/1.1\r\nHost: x\r\n"))

    # A token holder still gets in while they are held, at once.
    async with McpClient(f"{gateway.url}/t/{TOKEN}/mcp") as client:
        t0 = time.monotonic()
        assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"
        served_in = time.monotonic() - t0
    assert served_in < 2, served_in

    # Every partial request is closed: the flood beyond 16 per client at once (evicted), the
    # rest when their 1 s head deadline passes (with a 408).
    outcomes = await asyncio.to_thread(
        lambda: [_closed_by_server(s, 3.0) for s in partial_sockets])
    held = sum(1 for o in outcomes if o is None)
    timed_out = sum(1 for o in outcomes if o and o.startswith(b"HTTP/1.1 408"))
    assert held == 0, f"{held} half-open connections still held"
    assert 1 <= timed_out <= 16, timed_out
    elapsed = time.monotonic() - started
    print(f"300 half-open requests: {300 - timed_out} evicted, {timed_out} timed out with 408; "
          f"all closed within {elapsed:.1f}s; token holder served in {served_in * 1000:.0f} ms")


async def test_a_slow_body_gets_408_within_the_body_timeout(gateway: GatewayProcess) -> None:
    head = (f"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
            "Content-Length: 100\r\n\r\n{\"jsonrpc\"").encode()
    sock = _partial(gateway.port, head)
    try:
        t0 = time.monotonic()
        answer = await asyncio.to_thread(_closed_by_server, sock, 5.0)
        waited = time.monotonic() - t0
    finally:
        sock.close()
    assert answer is not None and answer.startswith(b"HTTP/1.1 408"), answer
    assert 0.8 < waited < 3, waited


async def test_memory_stays_flat_over_many_calls_and_the_trajectory_pages(
    gateway: GatewayProcess,
) -> None:
    """Each call carries 20 kB in and out; the trajectory (40 kB per call) goes to a file."""
    text = "x" * 20_000
    async with McpClient(f"{gateway.url}/t/{TOKEN}/mcp") as client:
        async def calls(n: int) -> None:
            for _ in range(n // 8):
                await asyncio.gather(*(client.call_tool("echo", {"text": text})
                                       for _ in range(8)))

        await calls(400)  # warm up: caches, pools, the allocator's arenas
        before = gateway.rss_kib()
        await calls(2400)
        after = gateway.rss_kib()
    grown_mb = (after - before) / 1024
    print(f"gateway RSS {before / 1024:.1f} MB -> {after / 1024:.1f} MB over 2,400 calls "
          f"of 20 kB (the trajectory holds ~{2800 * 40 / 1000:.0f} MB of events)")
    # Kept in memory, 2,400 such calls grew it by ~100 MB.
    assert grown_mb < 15, grown_mb

    async with aiohttp.ClientSession() as http:
        async with http.get(f"{gateway.url}/t/{TOKEN}/trajectory",
                            params={"offset": "10", "limit": "3"}) as resp:
            assert resp.status == 200
            assert resp.headers["AgentEnv-Trajectory-Events"] == str(2800 * 2)
            events = [json.loads(line) for line in (await resp.text()).splitlines()]
        assert [e["event_id"] for e in events] == ["evt-11", "evt-12", "evt-13"]
        async with http.get(f"{gateway.url}/t/{TOKEN}/trajectory",
                            params={"limit": "1"}) as resp:
            (first,) = [json.loads(line) for line in (await resp.text()).splitlines()]
        assert first["type"] == "tool_call" and first["arguments"] == {"text": text}
        async with http.get(f"{gateway.url}/t/{TOKEN}/trajectory",
                            params={"offset": "-1"}) as resp:
            assert resp.status == 400


def test_the_trajectory_log_pages_and_holds_only_offsets(tmp_path: Any) -> None:
    from agentenv_protocol.trajectory_log import TrajectoryLog

    log = TrajectoryLog(str(tmp_path))
    for i in range(1000):
        log.append({"i": i, "blob": "y" * 1000, "odd": "\udcff"})
    assert len(log) == 1000 and log.size > 1_000_000
    assert [e["i"] for e in log.events(998, 10)] == [998, 999]
    assert log.events(5, 1)[0]["odd"] == "\udcff"  # an undecodable byte, escaped, read back
    assert log.events(2000) == []
    log.close()

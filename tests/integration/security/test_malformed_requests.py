"""Malformed requests to the gateway and to an env server: 400/401 and one log line each.

The hostile test that found it: non-ASCII bytes in ``Authorization`` (no token needed, so anyone
could flood the log with tracebacks) and deeply nested JSON bodies gave 500 and a traceback.
Both servers run as their own processes; requests are raw bytes over TCP, and each server's
stderr is read after it stops.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

TOKEN = "malformed-test-token"
ENV_SCRIPT = """
from agentenv_protocol import AgentEnvEnvironment, environment_card, tool

@environment_card(name="plain")
class PlainEnv(AgentEnvEnvironment):
    @tool(name="echo")
    def echo(self, text: str) -> str:
        \"\"\"Send the text back.\"\"\"
        return text

PlainEnv().serve()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def raw(port: int, method: str, path: str, headers: list[tuple[str, bytes]],
        body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP/1.1 request as raw bytes; the status and body of the answer."""
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close",
             f"Content-Length: {len(body)}".encode()]
    lines += [name.encode() + b": " + value for name, value in headers]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _stop(process: subprocess.Popen[bytes]) -> str:
    process.terminate()
    _out, err = process.communicate(timeout=10)
    return err.decode("utf-8", "replace")


@pytest.fixture
def servers() -> Iterator[dict[str, int]]:
    """An env server and a gateway over it, as processes; after the test, their logs are
    checked: no traceback, and every line one line of ours."""
    env_port = _free_port()
    gateway_port = _free_port()
    while gateway_port == env_port:  # bind(0) may hand out the same port twice in a row
        gateway_port = _free_port()
    env = _start([sys.executable, "-c", ENV_SCRIPT],
                 {"MCP_HOST": "127.0.0.1", "MCP_PORT": str(env_port)})
    gateway = _start([sys.executable, "-m", "agentenv_protocol.gateway", "--child",
                      f"http://127.0.0.1:{env_port}", "--host", "127.0.0.1",
                      "--port", str(gateway_port)], {"AGENTENV_GATEWAY_TOKEN": TOKEN})
    try:
        _wait_port(env_port)
        _wait_port(gateway_port)
        deadline = time.monotonic() + 20
        while (answer := raw(gateway_port, "GET", f"/t/{TOKEN}/ready", []))[0] != 200:
            exited = {name: p.returncode for name, p in (("env", env), ("gateway", gateway))
                      if p.poll() is not None}
            # Say why: a server that exited (its port taken) reads differently from one
            # still waiting for its child.
            assert not exited and time.monotonic() < deadline, (
                f"the gateway did not become ready: /ready answered {answer[0]} "
                f"{answer[1][:300]!r}; exited: {exited}")
            time.sleep(0.05)
        yield {"env": env_port, "gateway": gateway_port}
    finally:
        logs = {"env": _stop(env), "gateway": _stop(gateway)}
        for name, log in logs.items():  # shown by pytest if the setup above failed
            print(f"{name} stderr:\n{log}")
    for name, log in logs.items():
        assert "Traceback" not in log, (name, log)
        lines = [line for line in log.splitlines() if line.strip()]
        assert all(len(line) < 400 and not line.startswith(" ") for line in lines), lines
        assert len(lines) <= 21, lines  # rate-limited: 20 lines a minute, then a count
        refused = [line for line in lines if line[:3] in ("400", "401", "500")]
        print(f"{name} log: {len(lines)} lines: {lines}")
        assert not [line for line in refused if line.startswith("500")], (name, refused)


JSON = [("Content-Type", b"application/json"), ("Accept", b"application/json, text/event-stream")]
DEEP = b"[" * 200_000 + b"]" * 200_000
NOT_UTF8 = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\xff\xfe"}'


def _nested(depth: int) -> dict[str, object]:
    value: object = "bottom"
    for _ in range(depth):
        value = {"d": value}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x", "deep": value}}}


def test_non_ascii_authorization_is_a_plain_401(servers: dict[str, int]) -> None:
    port = servers["gateway"]
    for value in (b"Bearer \xff\xfe\x80", b"Bearer " + "jeton-\u00e9t\u00e9".encode(),
                  b"\xc3\x28", b"Bearer \x00\x01"):
        status, _ = raw(port, "GET", "/ready", [("Authorization", value)])
        assert status in (400, 401), (value, status)
    status, _ = raw(port, "GET", "/t/%FF%FE/ready", [])
    assert status == 401
    # The env server has no token; the header is ignored, not a crash.
    status, _ = raw(servers["env"], "GET", "/ready", [("Authorization", b"Bearer \xff\xfe")])
    assert status == 200


@pytest.mark.parametrize("target", ["gateway", "env"])
def test_deep_and_undecodable_bodies_are_400_on_mcp_and_parse_errors_on_the_data_plane(
    servers: dict[str, int], target: str,
) -> None:
    port = servers[target]
    prefix = f"/t/{TOKEN}" if target == "gateway" else ""
    auth = [("Authorization", f"Bearer {TOKEN}".encode())] if target == "gateway" else []
    for body in (DEEP, json.dumps(_nested(150)).encode(), NOT_UTF8):
        status, answer = raw(port, "POST", f"{prefix}/mcp", JSON + auth, body)
        assert status == 400, (body[:40], status, answer)
        assert json.loads(answer)["error"]["code"] == -32700
    for body in (DEEP, NOT_UTF8):
        status, answer = raw(port, "POST", f"{prefix}/agentenv", JSON + auth, body)
        assert status == 200  # the data plane answers errors by code
        assert json.loads(answer)["error"] == {"code": -32700, "message": "parse error"}


def test_headers_that_are_not_utf8_do_not_break_a_session(servers: dict[str, int]) -> None:
    """A role or session header with undecodable bytes: refused or ignored, never a 500."""
    port = servers["gateway"]
    auth = [("Authorization", f"Bearer {TOKEN}".encode())]
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}).encode()
    status, _ = raw(port, "POST", "/mcp", JSON + auth + [("AgentEnv-Role", b"\xff\xfe")], init)
    assert status == 200
    call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": "hi"}}}).encode()
    for header in ("AgentEnv-Role", "Mcp-Session-Id"):
        status, _ = raw(port, "POST", "/mcp", JSON + auth + [(header, b"\xff\xfe\x80")], call)
        assert status in (400, 404), (header, status)


async def test_a_flood_of_bad_tokens_leaves_a_bounded_log(servers: dict[str, int]) -> None:
    """200 requests with undecodable tokens: at most 21 log lines (20 and a count)."""
    port = servers["gateway"]
    statuses = await asyncio.gather(*(asyncio.to_thread(
        raw, port, "GET", "/state", [("Authorization", b"Bearer \xff" + bytes([i % 100]))])
        for i in range(200)))
    assert {status for status, _ in statuses} <= {400, 401}  # 400: control bytes in a header

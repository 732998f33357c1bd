"""``agent-env run echo-mcp`` against the raw Docker floor, measured side by side.

The floor is what the run does at its least, by hand: ``docker run -d`` of the same env image
with a port published on 127.0.0.1, waiting for its ``/ready``, one MCP call (``initialize`` then
``tools/call echo``, plain HTTP), ``docker rm -f``. The warm run (images built, ledger written)
has a bar of 2.5x that floor; floor and warm samples alternate so drift hits both alike. The
cold run removes the env image first (the base image and the gateway's stay), so it pays the
build; it has no bar and is reported in seconds.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from bench.measure import Series, time_command

FLOOR = "echo-mcp floor: docker run + 1 MCP call + docker rm -f"
WARM = "agent-env run echo-mcp (warm)"
COLD = "agent-env run echo-mcp (cold: env image removed)"
ACCEPT = "application/json, text/event-stream"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(url: str, body: dict, session: str | None = None) -> tuple[dict, str | None]:
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    if session:
        headers["Mcp-Session-Id"] = session
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
        session = response.headers.get("Mcp-Session-Id") or session
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text), session


def one_mcp_call(base: str) -> None:
    """``initialize`` and ``tools/call echo``, as any client must (no library imported)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}}
    _, session = _post(f"{base}/mcp", init)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "floor"}}}
    reply, _ = _post(f"{base}/mcp", call, session)
    assert reply["result"]["content"][0]["text"] == "floor", reply


def floor_once(image: str) -> float:
    start = time.perf_counter()
    port = _free_port()
    container = subprocess.run(
        ["docker", "run", "-d", "-p", f"127.0.0.1:{port}:18765", "-e", "MCP_HOST=0.0.0.0",
         "-e", "MCP_PORT=18765", image], capture_output=True, text=True, check=True,
    ).stdout.strip()
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        one_mcp_call(base)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=True)
    return time.perf_counter() - start


def env_image(output: str) -> str:
    found = re.search(r"^envs/echo: image (\S+) \(cached\)$", output, re.MULTILINE)
    if not found:
        raise RuntimeError(f"no cached echo image line in the run's output:\n{output[-2000:]}")
    return found.group(1)


def run(*, quick: bool, workdir: Path, agent_env: list[str]) -> list[Series]:
    repeat = 3 if quick else 9
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-echo-mcp")}
    command = [*agent_env, "run", "echo-mcp"]
    full_env = {**os.environ, **env}
    subprocess.run(command, env=full_env, capture_output=True, check=True)  # ledger, images
    again = subprocess.run(command, env=full_env, capture_output=True, text=True, check=True)
    image = env_image(again.stdout)
    floor_once(image)  # the first docker run of a session pays extra; not counted
    floor: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        floor.append(floor_once(image))
        warm += time_command(command, repeat=1, env=env)[0]
    cold: list[float] = []
    for _ in range(1 if quick else 2):
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=True)
        cold += time_command(command, repeat=1, env=env)[0]
    return [
        Series(FLOOR, floor),
        Series(WARM, warm, baseline=FLOOR, bar=2.5),
        Series(COLD, cold, baseline=FLOOR,
               note="builds the env image (pip install from PyPI); base and gateway present"),
    ]

"""``agent-env run echo-mcp`` against the raw Docker floor, measured side by side.

The floor is what the run does at its least, by hand: ``docker run -d`` of the same env image
with a port published on 127.0.0.1, waiting for its ``/ready``, one MCP call (``initialize`` then
``tools/call echo``, plain HTTP), ``docker rm -f``. The warm run (images built, ledger written)
has a bar of 2.5x that floor; floor and warm samples alternate so drift hits both alike. The
cold run removes the env image first (the base image and the gateway's stay), so it pays the
build (layers it shares with other images on the engine, as mail-mcp's, are reused); the
fresh run changes the env's requirements by a comment, so everything after that COPY is built,
``pip install`` from PyPI included. Neither has a bar.

The topology floor (no bar) is the engine work of the run's own layout, by hand with the docker
CLI: the private (internal) and edge networks side by side, the env container and the gateway
container (on both networks, publishing its port) side by side, the gateway's ``/ready``, one
MCP call through the gateway, both containers removed, then both networks. Its ratio to the
floor is what the layout costs before AgentEnv does anything; the warm run's note gives its
ratio to the topology floor, which is what AgentEnv itself adds: its bar.

The memory of an idle deployed env is read from a ``run echo-mcp --keep`` holding its sandbox
up: each container's cgroup usage less its page cache, summed over the sandbox, a few reads a
second apart once the run holds.
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

from bench.bars import Bar
from bench.measure import Series, bytecode_cached, time_command

FLOOR = "echo-mcp floor: docker run + 1 MCP call + docker rm -f"
WARM = "agent-env run echo-mcp (warm)"
COLD = "agent-env run echo-mcp (cold: env image removed)"
FRESH = "agent-env run echo-mcp (cold: new env sources, nothing cached)"
TOPOLOGY = "echo-mcp topology floor: 2 networks + env and gateway containers, by hand"
MEMORY = "memory of an idle deployed echo env (MiB)"
ACCEPT = "application/json, text/event-stream"
#: Issue 39: what AgentEnv adds to its own layout (CLI, ledger, DNS answerer, verifier) keeps a
#: warm run within 1.25x the topology floor; an idle echo env (gateway, env server and DNS
#: answerer containers) takes at most 60 MiB, so 32 of them fit in 2 GiB.
BARS = (Bar(WARM, "of_topology", at_most=1.25), Bar(MEMORY, "median", at_most=60, unit="MiB"))
#: The env's image line among the run's progress. Step notes may carry a ``[task]`` prefix
#: (``[tasks/smoke.json] envs/echo: image agentenv/echo:<hash> (cached)``), and a first run says
#: ``... built in 1.2s`` instead of ``(cached)``.
IMAGE_LINE = re.compile(
    r"^(?:\[[^\]\n]*\]\s+)?envs/echo: image (\S+)(?: \(cached\)| built in .*)$", re.MULTILINE)


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


def tool_text(base: str, name: str, arguments: dict) -> str:
    """``initialize`` and one ``tools/call``, as any client must (no library imported); the
    result's first text."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}}
    _, session = _post(f"{base}/mcp", init)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}
    reply, _ = _post(f"{base}/mcp", call, session)
    return str(reply["result"]["content"][0]["text"])


def wait_ready(base: str, timeout: float = 30) -> None:
    """Poll ``base``/ready finely until it answers 200 (``timeout`` seconds at most)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{base}/ready", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def ready_then_call(base: str) -> None:
    """``/ready``, then one call of the echo tool."""
    wait_ready(base)
    assert tool_text(base, "echo", {"text": "floor"}) == "floor"


def floor_once(image: str) -> float:
    start = time.perf_counter()
    port = _free_port()
    container = subprocess.run(
        ["docker", "run", "-d", "-p", f"127.0.0.1:{port}:18765", "-e", "MCP_HOST=0.0.0.0",
         "-e", "MCP_PORT=18765", image], capture_output=True, text=True, check=True,
    ).stdout.strip()
    try:
        base = f"http://127.0.0.1:{port}"
        ready_then_call(base)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=True)
    return time.perf_counter() - start


def _side_by_side(*commands: list[str]) -> None:
    """Run docker commands at once and wait for all; any failure raises with its stderr."""
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for c in commands]
    failed = []
    for command, process in zip(commands, running, strict=True):
        _, err = process.communicate()
        if process.returncode:
            failed.append(f"{' '.join(command[:4])}: {err.strip()}")
    if failed:
        raise RuntimeError("; ".join(failed))


def topology_floor_once(image: str, gateway_image: str) -> float:
    """The run's layout by hand (see the module's docstring); seconds."""
    import secrets

    from agentenv_mcp_env.gateway_image import GATEWAY_PORT, gateway_command

    start = time.perf_counter()
    name = f"floor-{secrets.token_hex(4)}"
    token = secrets.token_urlsafe(16)
    env_c, gateway_c = f"{name}-env", f"{name}-gateway"
    _side_by_side(
        ["docker", "network", "create", "--internal", "-o",
         "com.docker.network.bridge.inhibit_ipv4=true", name],
        ["docker", "network", "create", f"{name}-edge"])
    try:
        command = " ".join(gateway_command(["http://env:18765"], name="echo", ready_timeout=60))
        _side_by_side(
            ["docker", "run", "-d", "--init", "--name", env_c, "--network", name,
             "--network-alias", "env", "-e", "MCP_HOST=0.0.0.0", "-e", "MCP_PORT=18765", image],
            ["sh", "-c", f"docker create --init --name {gateway_c} --network {name} "
             f"-p 127.0.0.1::{GATEWAY_PORT} -e AGENTENV_GATEWAY_TOKEN={token} {gateway_image} "
             f"{command} >/dev/null && docker network connect {name}-edge {gateway_c} && "
             f"docker start {gateway_c} >/dev/null"])
        port = subprocess.run(["docker", "port", gateway_c, str(GATEWAY_PORT)],
                              capture_output=True, text=True, check=True).stdout.split(":")[-1]
        base = f"http://127.0.0.1:{port.strip()}/t/{token}"
        ready_then_call(base)
    finally:
        subprocess.run(["docker", "rm", "-f", env_c, gateway_c], capture_output=True)
        subprocess.run(["docker", "network", "rm", name, f"{name}-edge"], capture_output=True,
                       check=True)
    return time.perf_counter() - start


def gateway_image() -> str:
    """The newest gateway image on the engine (the warm runs built or found it)."""
    listed = subprocess.run(
        ["docker", "images", "--filter", "label=agentenv.role=gateway", "--format",
         "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True, check=True).stdout.split()
    if not listed:
        raise RuntimeError("no gateway image on the engine after a run of echo-mcp")
    return listed[0]


def env_image(output: str) -> str:
    """The echo env's image reference, from a run's progress lines."""
    found = IMAGE_LINE.search(output)
    if not found:
        raise RuntimeError(f"no echo image line in the run's output:\n{output[-2000:]}")
    return found.group(1)


def _agent_env(command: list[str], env: dict[str, str]) -> str:
    """Run ``agent-env`` for its output; a failure says why (its stderr), not just its code."""
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n"
                           f"{(done.stdout + done.stderr)[-2000:]}")
    return done.stdout + done.stderr


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    with bytecode_cached():
        return _measure(quick, smoke, workdir, agent_env)


def _measure(quick: bool, smoke: bool, workdir: Path, agent_env: list[str]) -> list[Series]:
    repeat = 1 if smoke else 3 if quick else 9
    cold_runs = 1 if quick or smoke else 2
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-echo-mcp")}
    command = [*agent_env, "run", "echo-mcp"]
    full_env = {**os.environ, **env}
    _agent_env(command, full_env)  # ledger, images
    image = env_image(_agent_env(command, full_env))
    floor_once(image)  # the first docker run of a session pays extra; not counted
    gateway = gateway_image()
    floor: list[float] = []
    topology: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        floor.append(floor_once(image))
        topology.append(topology_floor_once(image, gateway))
        warm += time_command(command, repeat=1, env=env)[0]
    cold: list[float] = []
    for _ in range(cold_runs):
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=True)
        cold += time_command(command, repeat=1, env=env)[0]
    fresh = _fresh_builds(workdir, agent_env, env, cold_runs)
    memory, kinds = kept_env_memory(command, full_env, reads=1 if smoke else 5)
    import statistics

    over_topology = statistics.median(warm) / statistics.median(topology)
    return [
        Series(FLOOR, floor),
        Series(TOPOLOGY, topology, baseline=FLOOR,
               note="what the run's layout costs before AgentEnv does anything"),
        Series(WARM, warm, baseline=FLOOR,
               note=f"{over_topology:.2f}x the topology floor: what AgentEnv adds to its layout",
               figures={"of_topology": over_topology}),
        Series(COLD, cold, baseline=FLOOR,
               note="layers shared with other images on the engine are reused"),
        Series(FRESH, fresh, baseline=FLOOR,
               note="every env layer built: pip install from PyPI"),
        Series(MEMORY, memory, unit="MiB",
               note=", ".join(f"{kind} {mib:.1f}" for kind, mib in sorted(kinds.items()))),
    ]


def kept_env_memory(command: list[str], environ: dict[str, str],
                    reads: int) -> tuple[list[float], dict[str, float]]:
    """``command --keep`` up to its hold, then ``reads`` reads a second apart of the MiB its
    sandbox's containers hold together; also the last read's MiB per kind of container."""
    import signal

    import docker

    from bench.measure import resident_mib

    client = docker.from_env()
    before = {c.id for c in client.containers.list(all=True)}
    process = subprocess.Popen([*command, "--keep"], env=environ, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        seen = []
        for line in process.stdout:
            seen.append(line)
            if line.startswith("Holding "):
                break
        else:
            raise RuntimeError("run --keep ended without holding:\n" + "".join(seen)[-2000:])
        time.sleep(1)  # idle: the run's own calls are over
        ours = [c for c in client.containers.list() if c.id not in before
                and "agentenv.sandbox" in c.labels]
        if not ours:
            raise RuntimeError("run --keep holds no container of its own")
        totals, kinds = [], {}
        for index in range(reads):
            if index:
                time.sleep(1)
            kinds = {c.labels.get("agentenv.container", c.name): resident_mib(c) for c in ours}
            totals.append(sum(kinds.values()))
        return totals, kinds
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def _fresh_builds(workdir: Path, agent_env: list[str], env: dict[str, str],
                  count: int) -> list[float]:
    """Runs of a copy of echo-mcp whose requirements differ by a comment each time, so no
    layer after ``COPY requirements.txt`` is in the engine's cache."""
    import shutil
    import uuid

    from agentenv_mcp_env.plugin import BUNDLES

    bundle = workdir / "echo-mcp-fresh"
    shutil.rmtree(bundle, ignore_errors=True)
    shutil.copytree(BUNDLES / "echo-mcp", bundle)
    requirements = bundle / "envs" / "echo" / "requirements.txt"
    base = requirements.read_text()
    samples = []
    try:
        for _ in range(count):
            requirements.write_text(f"{base}# bench {uuid.uuid4().hex}\n")
            samples += time_command([*agent_env, "run", str(bundle)], repeat=1, env=env)[0]
    finally:  # the one-off images would pile up on the engine
        listed = subprocess.run(
            ["docker", "images", "--filter", "label=agentenv.env", "--format",
             '{{.ID}} {{index .Labels "agentenv.env"}}'], capture_output=True, text=True)
        stale = [line.split()[0] for line in listed.stdout.splitlines()
                 if str(bundle) in line]
        if stale:
            subprocess.run(["docker", "rmi", "-f", *stale], capture_output=True)
    return samples

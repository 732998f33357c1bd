"""``tools/call`` round trips, direct and through the gateway, with 1 and 16 clients.

Server, gateway and clients run as separate processes on loopback, as in a deployment.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.bars import Bar
from bench.measure import Series

ECHO_ENV = Path(__file__).with_name("echo_env.py")
TCP_PROXY = Path(__file__).with_name("tcp_proxy.py")
TOKEN = "bench-token"
START = "env server start to /ready"
VIA_16 = "tools/call via gateway, 16 client(s)"
#: Issue 39: an env server answers ``/ready`` within 150 ms of its start; the gateway adds at
#: most a millisecond to a lone client's call; under 16 clients it keeps at least 0.6 of the
#: direct throughput (the median of ``ROUNDS`` rounds: one round is noise) and spends at most
#: the env server's own CPU per forwarded call (each process's CPU time from /proc, so the
#: figure holds on a loaded machine). A byte-for-byte asyncio proxy in the gateway's place
#: (:mod:`bench.tcp_proxy`, no bar) gives the floor of that CPU: what any Python gateway
#: spends on the sockets alone.
BARS = (
    Bar(START, "median", at_most=0.15, unit="s"),
    Bar("tools/call via gateway, 1 client(s)", "added_ms", at_most=1.0, unit="ms"),
    Bar(VIA_16, "of_direct", at_least=0.6, unit=""),
    Bar(VIA_16, "gateway_cpu_of_env", at_most=1.0, unit=""),
)
ROUNDS = 5


async def _wait_ready(url: str) -> float:
    import aiohttp

    start = time.perf_counter()
    async with aiohttp.ClientSession() as http:
        for _ in range(400):
            try:
                async with http.get(url) as response:
                    if response.status == 200:
                        return time.perf_counter() - start
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.01)
    raise RuntimeError(f"{url} never became ready")


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far (0 where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _calls(url: str, clients: int, per_client: int,
                 warm_up: int = 20) -> tuple[list[float], float, float]:
    from agentenv_protocol.client import McpClient

    sessions = [McpClient(url) for _ in range(clients)]
    for session in sessions:
        await session.connect()
        for _ in range(warm_up):  # warm up connections and caches
            await session.call_tool_raw("echo", {"text": "hi"})
    latencies: list[float] = []

    async def worker(session: McpClient) -> None:
        for _ in range(per_client):
            start = time.perf_counter()
            await session.call_tool_raw("echo", {"text": "hi"})
            latencies.append(time.perf_counter() - start)

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(s) for s in sessions))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    for session in sessions:
        await session.close()
    return latencies, clients * per_client / wall, cpu / (clients * per_client) * 1e6


async def _measure(quick: bool, smoke: bool) -> list[Series]:
    from agentenv_protocol.testing import free_port

    env_port, gateway_port = free_port(), free_port()
    environ = {**os.environ, "MCP_HOST": "127.0.0.1", "MCP_PORT": str(env_port)}
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, str(ECHO_ENV)], env=environ,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gateway = None
    try:
        await _wait_ready(f"http://127.0.0.1:{env_port}/ready")
        ready_after = time.perf_counter() - started
        gateway = subprocess.Popen(
            [sys.executable, "-m", "agentenv_protocol.gateway", "--child",
             f"http://127.0.0.1:{env_port}", "--host", "127.0.0.1", "--port",
             str(gateway_port), "--token", TOKEN],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        await _wait_ready(f"http://127.0.0.1:{gateway_port}/t/{TOKEN}/ready")
        direct_url = f"http://127.0.0.1:{env_port}/mcp"
        gateway_url = f"http://127.0.0.1:{gateway_port}/t/{TOKEN}/mcp"
        out = [Series(START, [ready_after])]
        sizes = ((1, 5, 1), (16, 20, 1)) if smoke else ((1, 300, 1), (16, 40, 3)) if quick \
            else ((1, 2000, 1), (16, 300, ROUNDS))
        warm_up = 2 if smoke else 20
        for clients, per_client, rounds in sizes:
            calls = clients * (per_client + warm_up)
            direct: list[float] = []
            through: list[float] = []
            rates: list[tuple[float, float]] = []
            env_direct = env_via = gateway_cpu = client_cpu = 0.0
            for _ in range(rounds):  # alternating, so drift hits both alike
                before = _cpu_seconds(server.pid)
                latencies, direct_rate, client_us = await _calls(direct_url, clients,
                                                                 per_client, warm_up)
                env_direct += _cpu_seconds(server.pid) - before
                direct += latencies
                before, before_gateway = _cpu_seconds(server.pid), _cpu_seconds(gateway.pid)
                latencies, gateway_rate, _ = await _calls(gateway_url, clients, per_client,
                                                          warm_up)
                env_via += _cpu_seconds(server.pid) - before
                gateway_cpu += _cpu_seconds(gateway.pid) - before_gateway
                client_cpu += client_us
                through += latencies
                rates.append((direct_rate, gateway_rate))
            env_direct_us = env_direct / (calls * rounds) * 1e6
            env_us = env_via / (calls * rounds) * 1e6
            gateway_us = gateway_cpu / (calls * rounds) * 1e6
            client_us = client_cpu / rounds
            direct_rate = _median([d for d, _ in rates])
            gateway_rate = _median([g for _, g in rates])
            of_direct = _median([g / d for d, g in rates])
            name = f"tools/call direct, {clients} client(s)"
            added_ms = (_median(through) - _median(direct)) * 1000
            # Were both runs bound by the two cores, throughput would go as 1 / the CPU a call
            # costs in all processes, and the ratio would be this; a direct run that leaves a
            # core idle (waiting on the wire, as it often does here) lets the ratio above it.
            bound = (client_us + env_direct_us) / (client_us + env_us + gateway_us)
            # None when too few calls ran for the CPU clock's ticks (a smoke run's lone client)
            of_env = gateway_us / env_us if env_us else None
            each = f" (median of {rounds} rounds)" if rounds > 1 else ""
            out.append(Series(name, direct,
                              note=f"{direct_rate:.0f} calls/s; env server "
                              f"{env_direct_us:.0f} us CPU/call",
                              figures={"calls_per_s": direct_rate,
                                       "env_cpu_us": env_direct_us}))
            out.append(Series(
                f"tools/call via gateway, {clients} client(s)", through, baseline=name,
                note=f"{gateway_rate:.0f} calls/s = {of_direct:.2f} of direct{each}; "
                f"{added_ms:+.2f} ms median; gateway {gateway_us:.0f} us CPU/call = "
                f"{'-' if of_env is None else f'{of_env:.2f}'}x the env server's "
                f"{env_us:.0f} (client {client_us:.0f}); ratio if CPU-bound {bound:.2f}",
                figures={"calls_per_s": gateway_rate, "of_direct": of_direct,
                         "added_ms": added_ms, "gateway_cpu_us": gateway_us,
                         "env_cpu_us": env_us, "cpu_bound_ratio": bound,
                         **({} if of_env is None else {"gateway_cpu_of_env": of_env})},
            ))
        out.append(await _proxy_floor(env_port, server.pid, per_client, warm_up))
        return out
    finally:
        for process in (gateway, server):
            if process is not None:
                process.terminate()
                process.wait()


async def _proxy_floor(env_port: int, server_pid: int, per_client: int,
                       warm_up: int) -> Series:
    """16 clients (``per_client`` calls each, as the 16-client round) through
    :mod:`bench.tcp_proxy` in the gateway's place: its CPU per call is the floor of any
    asyncio gateway's (the sockets alone, no HTTP or JSON read)."""
    from agentenv_protocol.testing import free_port

    port = free_port()
    proxy = subprocess.Popen([sys.executable, str(TCP_PROXY), str(port), str(env_port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await _wait_ready(f"http://127.0.0.1:{port}/ready")
        before, before_env = _cpu_seconds(proxy.pid), _cpu_seconds(server_pid)
        latencies, rate, _ = await _calls(f"http://127.0.0.1:{port}/mcp", 16, per_client,
                                          warm_up)
        calls = 16 * (per_client + warm_up)
        proxy_us = (_cpu_seconds(proxy.pid) - before) / calls * 1e6
        env_us = (_cpu_seconds(server_pid) - before_env) / calls * 1e6
        return Series("tools/call via a byte-for-byte proxy, 16 client(s)", latencies,
                      note=f"{rate:.0f} calls/s; proxy {proxy_us:.0f} us CPU/call (env server "
                      f"{env_us:.0f}): the floor of a Python gateway's CPU",
                      figures={"proxy_cpu_us": proxy_us, "env_cpu_us": env_us})
    finally:
        proxy.terminate()
        proxy.wait()


def _median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    return asyncio.run(_measure(quick, smoke))

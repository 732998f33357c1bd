"""Token bypass: an env server is reachable only through its gateway, on the real engine.

The hostile test that found it: with an env up, a host process POSTed ``initialize`` to the env
container's own address and called tools with no token. Here the same request goes to the env
container's address from the host, from a container outside the sandbox and from a container
inside it (an agent, on the edge network); each must fail to reach the env server (refused, timed
out, or answered by something that is not it: on this CI's network an off-host proxy answers 404
for any address the host does not route), while the gateway with the token still serves.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from run_children import network_gateway

from agent_env.api import ContainerSpec

pytestmark = pytest.mark.docker

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "hostile", "version": "0"}}}).encode()

#: Run in a container: prints REACHED (the env server answered initialize), ANSWERED <status>
#: (something else answered) or REFUSED <error> (nothing reachable), then the seconds it took.
PROBE = """
import sys, time, urllib.request, urllib.error
url, body, token = sys.argv[1], sys.argv[2].encode(), sys.argv[3] if len(sys.argv) > 3 else ""
headers = {"Content-Type": "application/json", "Accept": "application/json"}
if token:
    headers["Authorization"] = "Bearer " + token
start = time.monotonic()
try:
    with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers),
                                timeout=4) as resp:
        answer = resp.read()
        print("REACHED" if b'"serverInfo"' in answer else f"ANSWERED {resp.status}", end=" ")
except urllib.error.HTTPError as exc:
    print(f"ANSWERED {exc.code}", end=" ")
except Exception as exc:
    print("REFUSED " + type(exc).__name__, end=" ")
print(f"{time.monotonic() - start:.2f}")
"""


def _probe(url: str, token: str = "") -> list[str]:
    """The argv that runs :data:`PROBE` against ``url`` in a container."""
    return ["python", "-c", PROBE, url, INITIALIZE.decode(), *([token] if token else [])]


async def _initialize_from_host(url: str) -> tuple[str, float]:
    start = time.monotonic()
    try:
        async with aiohttp.ClientSession() as http, http.post(
                url, data=INITIALIZE, timeout=aiohttp.ClientTimeout(total=4),
                headers={"Content-Type": "application/json",
                         "Accept": "application/json"}) as resp:
            body = await resp.read()
            outcome = "REACHED" if b'"serverInfo"' in body else f"ANSWERED {resp.status}"
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        outcome = f"REFUSED {type(exc).__name__}"
    return outcome, time.monotonic() - start


def _address(docker_client: Any, name: str) -> str:
    container = docker_client.containers.get(name)
    addresses = [n["IPAddress"] for n in container.attrs["NetworkSettings"]["Networks"].values()
                 if n.get("IPAddress")]
    assert len(addresses) == 1, addresses  # the env server is on the private network only
    return addresses[0]


async def test_the_env_server_is_reachable_only_through_the_gateway(
    deployed_vault: Any, docker_client: Any, run_id: str,
) -> None:
    env = deployed_vault
    sandbox = env.sandbox
    env_ip = _address(docker_client, sandbox.container_name("env"))
    direct = f"http://{env_ip}:18765/mcp"

    # From the host: the env's own address does not reach the env server.
    outcome, seconds = await _initialize_from_host(direct)
    assert not outcome.startswith("REACHED"), (outcome, direct)
    print(f"host -> env {env_ip}: {outcome} after {seconds:.2f}s")

    # From a container outside the sandbox (the default bridge).
    outside = docker_client.containers.run(
        "python:3.11-slim", _probe(direct), remove=True,
        labels={"agentenv.run": run_id}).decode()
    assert not outside.startswith("REACHED"), outside
    print(f"other container -> env: {outside}")

    # From an agent's place in the sandbox (the edge network): the gateway by name with the
    # token serves; the env server neither by address nor by name.
    await sandbox.run_container(ContainerSpec(
        name="agent", image="python:3.11-slim", command=("sleep", "600"), private=False))
    agent = docker_client.containers.get(sandbox.container_name("agent"))
    for url in (direct, "http://env:18765/mcp"):
        _code, out = agent.exec_run(_probe(url))
        assert not out.decode().startswith("REACHED"), (url, out)
        print(f"agent -> {url}: {out.decode()}")
    _code, out = agent.exec_run(_probe("http://gateway:18765/mcp", env.token))
    assert out.decode().startswith("REACHED"), out
    _code, out = agent.exec_run(_probe("http://gateway:18765/mcp"))
    assert out.decode().startswith("ANSWERED 401"), out

    # The gateway with the token still works from the host, and calls the tool.
    from agentenv_protocol.client import McpClient

    async with McpClient(env.mcp_url) as client:
        assert (await client.call_tool("open_vault")).text == "opened"

    # The run record says the env servers are isolated.
    assert env.describe()["sandbox"]["env_isolation"] is True


async def test_the_env_server_cannot_reach_out_and_the_gateway_can(
    deployed_vault: Any, docker_client: Any,
) -> None:
    """The private network has no route out: the env server reaches no service of the host on
    any of its addresses; the gateway (on the edge too) reaches the host's service."""
    from aiohttp import web

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="host service")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "0.0.0.0", 0)
    await site.start()
    port = runner.addresses[0][1]
    sandbox = deployed_vault.sandbox
    edge = docker_client.networks.get(sandbox.edge_network)
    host_on_edge = network_gateway(edge)
    probe = ("import sys, urllib.request\n"
             "for h in sys.argv[2:]:\n"
             "    try: print(h, urllib.request.urlopen(f'http://{h}:{sys.argv[1]}/', timeout=2)"
             ".status)\n"
             "    except Exception as e: print(h, 'unreachable', type(e).__name__)\n")
    try:
        env = docker_client.containers.get(sandbox.container_name("env"))
        # In a thread: the host's service answers on this test's event loop.
        _code, out = await asyncio.to_thread(env.exec_run, [
            "python", "-c", probe, str(port), host_on_edge, "172.17.0.1", "host.docker.internal"])
        assert out.decode().count("unreachable") == 3, out.decode()
        gateway = docker_client.containers.get(sandbox.container_name("gateway"))
        _code, out = await asyncio.to_thread(gateway.exec_run,
                                             ["python", "-c", probe, str(port), host_on_edge])
        assert out.decode().split() == [host_on_edge, "200"], out.decode()
    finally:
        await runner.cleanup()


async def test_a_provider_that_does_not_isolate_says_so_in_the_run_record(
    docker_client: Any, run_id: str,
) -> None:
    from agent_env.api import SandboxSpec
    from agent_env.sandbox.local import LocalSandboxProvider
    from agentenv_docker_env.sandbox import DockerSandboxProvider
    from agentenv_mcp_env.deployment import sandbox_record

    isolated = await DockerSandboxProvider().create(
        SandboxSpec(name="iso", mode="vm", labels={"agentenv.run": run_id}))
    plain = await DockerSandboxProvider(internal_network=False).create(
        SandboxSpec(name="plain", mode="vm", labels={"agentenv.run": run_id}))
    try:
        assert sandbox_record(isolated)["env_isolation"] is True
        reason = sandbox_record(plain)["env_isolation"]
        assert isinstance(reason, str) and "internal_network = false" in reason
    finally:
        await isolated.terminate()
        await plain.terminate()
    local = LocalSandboxProvider.from_config()
    sandbox = await local.create(SandboxSpec(name="loc", mode="vm"))
    try:
        reason = sandbox_record(sandbox)["env_isolation"]
        assert isinstance(reason, str) and "does not isolate" in reason
    finally:
        await sandbox.terminate()

"""Service containers on the real engine: a healthcheck the sandbox reports, a named volume two
containers share, and a teardown that removes the volume. Run twice: through the ``docker``
provider (Engine API) and through ``DockerHostSandbox`` (the ``docker`` CLI the VM providers
drive), here with a TEST DOUBLE whose ``exec`` runs on this machine, whose dockerd stands in for
the one inside a VM."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from agent_env.sandbox.base import (
    ContainerSpec,
    ExecResult,
    Healthcheck,
    Sandbox,
    SandboxSpec,
    VolumeMount,
)
from agent_env.sandbox.docker_host import DockerHostSandbox
from agentenv_docker_env.sandbox import DockerSandboxProvider

pytestmark = pytest.mark.docker

IMAGE = "python:3.11-slim"
#: ready only once the file the command writes exists
CHECK = Healthcheck(("CMD-SHELL", "test -f /data/ready"), interval=0.5, timeout=2, retries=20)
WRITE = ("sh", "-c", "sleep 1; echo hello > /data/greeting; touch /data/ready; sleep 600")


class HostShellSandbox(DockerHostSandbox):
    """TEST DOUBLE of a VM sandbox: ``exec`` runs on this machine (its dockerd is the "VM's")."""

    provider_name = "host-shell (test double)"

    def __init__(self, run_id: str) -> None:
        self.id = f"hs-{secrets.token_hex(4)}"
        self.run_id = run_id

    async def exec(self, command: str | list[str], *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None,
                   ) -> ExecResult:
        assert isinstance(command, str)
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
        return ExecResult(proc.returncode or 0, out.decode(), err.decode())

    async def start_docker(self) -> None:
        raise AssertionError("this machine's dockerd is up")

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        target = Path(path)  # the "VM's" files are this machine's (staging under /tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)

    async def get_file(self, path: str) -> bytes:
        return Path(path).read_bytes()

    async def expose(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    async def terminate(self) -> None:
        await self.remove_containers()


async def _docker_sandbox(run_id: str) -> Sandbox:
    return await DockerSandboxProvider().create(
        SandboxSpec(name="svc", mode="vm", labels={"agentenv.run": run_id}))


async def _host_shell_sandbox(run_id: str) -> Sandbox:
    return HostShellSandbox(run_id)


async def _health(sandbox: Sandbox, name: str) -> str | None:
    for _ in range(100):
        health = await sandbox.container_health(name)
        if health in ("healthy", "unhealthy"):
            return health
        await asyncio.sleep(0.2)
    return await sandbox.container_health(name)


@pytest.mark.parametrize("make", [_docker_sandbox, _host_shell_sandbox],
                         ids=["docker", "docker-host"])
async def test_healthcheck_and_a_shared_named_volume(docker_client: Any, run_id: str,
                                                     make: Any) -> None:
    sandbox = await make(run_id)
    try:
        await sandbox.run_container(ContainerSpec(
            name="writer", image=IMAGE, command=WRITE, healthcheck=CHECK,
            volumes=(VolumeMount("shared", "/data"),)))
        await sandbox.run_container(ContainerSpec(
            name="plain", image=IMAGE, command=("sleep", "600")))
        assert await sandbox.container_health("plain") is None  # no healthcheck, no health
        assert await _health(sandbox, "writer") == "healthy"
        await sandbox.run_container(ContainerSpec(
            name="reader", image=IMAGE, command=("sh", "-c", "cat /data/greeting; sleep 600"),
            volumes=(VolumeMount("shared", "/data", read_only=True),)))
        for _ in range(50):
            if "hello" in await sandbox.container_logs("reader"):
                break
            await asyncio.sleep(0.1)
        assert "hello" in await sandbox.container_logs("reader")
        owned = {"label": f"agentenv.sandbox={sandbox.id}"}
        assert len(docker_client.volumes.list(filters=owned)) == 1
    finally:
        await sandbox.terminate()
    assert docker_client.volumes.list(filters=owned) == []
    assert docker_client.containers.list(all=True, filters=owned) == []


async def test_a_failing_healthcheck_reads_unhealthy(docker_client: Any, run_id: str) -> None:
    sandbox = await _docker_sandbox(run_id)
    try:
        await sandbox.run_container(ContainerSpec(
            name="sick", image=IMAGE, command=("sleep", "600"),
            healthcheck=Healthcheck(("CMD", "false"), interval=0.3, timeout=1, retries=2)))
        assert await _health(sandbox, "sick") == "unhealthy"
    finally:
        await sandbox.terminate()


def _network_gateway(docker_client: Any, name: str) -> str:
    config = docker_client.networks.get(name).attrs["IPAM"]["Config"]
    return str(config[0]["Gateway"])


@pytest.mark.parametrize("make", [_docker_sandbox, _host_shell_sandbox],
                         ids=["docker", "docker-host"])
async def test_outbound_containers_reach_out_and_offline_ones_fail_lookups_fast(
        docker_client: Any, run_id: str, make: Any) -> None:
    """An env with network policy open: its containers join the outbound network, through
    which this machine (standing in for the world) is reached; an offline one has no route,
    and an outside name fails at once (docker: under 100 ms) instead of after Docker's 10-20 s;
    the sandbox's own names still resolve."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"outside")

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("0.0.0.0", 0), Hello)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sandbox = await make(run_id)
    try:
        await sandbox.run_container(ContainerSpec(
            name="open", image=IMAGE, command=("sleep", "600"), outbound=True))
        await sandbox.run_container(ContainerSpec(
            name="closed", image=IMAGE, command=("sleep", "600")))
        out = getattr(sandbox, "outbound_network_name", None) or sandbox.outbound_network
        host = _network_gateway(docker_client, out)  # this machine, on the outbound network
        fetch = ("import time, urllib.request as u; t = time.time()\n"
                 f"try: print(u.urlopen('http://{host}:{port}', timeout=5).read().decode())\n"
                 "except Exception as e: print('failed', type(e).__name__)\n"
                 "print(round(time.time() - t, 2))")
        lookup = ("import socket, time; t = time.time()\n"
                  "try: socket.getaddrinfo('example.com', 80)\n"
                  "except OSError: pass\n"
                  "print(round(time.time() - t, 2))")
        opened = await _exec_in(docker_client, sandbox, "open", fetch)
        assert opened.splitlines()[0] == "outside", opened
        closed = await _exec_in(docker_client, sandbox, "closed", fetch)
        assert closed.startswith("failed"), closed
        peer = "import socket; print(socket.gethostbyname('open'))"
        assert (await _exec_in(docker_client, sandbox, "closed", peer)).count(".") == 3
        waited = float((await _exec_in(docker_client, sandbox, "closed", lookup)).strip())
        # Docker's own resolver waits 10-20 s; the docker provider's DNS answerer says "no such
        # name" at once, and a sandbox without one gives up after a second
        assert waited < (0.1 if make is _docker_sandbox else 4.0), waited
    finally:
        server.shutdown()
        await sandbox.terminate()
    owned = {"label": f"agentenv.sandbox={sandbox.id}"}
    assert docker_client.networks.list(filters=owned) == []


async def _exec_in(docker_client: Any, sandbox: Any, name: str, code: str) -> str:
    container = docker_client.containers.get(sandbox.container_name(name))
    result = await asyncio.to_thread(container.exec_run, ["python", "-c", code])
    return str(result.output.decode())


@pytest.mark.parametrize("make", [_docker_sandbox, _host_shell_sandbox],
                         ids=["docker", "docker-host"])
async def test_a_sealed_container_reaches_a_sealed_peer_and_not_other_edge_containers(
        docker_client: Any, run_id: str, make: Any) -> None:
    """``sealed_peer`` (an allow-listed agent's egress proxy) puts an edge container on the
    sealed network too: the sealed container reaches it by name, and still not an edge
    container that is not a peer."""
    serve = ("python", "-c", "import http.server as h; h.ThreadingHTTPServer(('', 8080), "
             "h.SimpleHTTPRequestHandler).serve_forever()")
    sandbox = await make(run_id)
    try:
        await sandbox.run_container(ContainerSpec(
            name="peer", image=IMAGE, command=serve, private=False, egress=True,
            sealed_peer=True))
        await sandbox.run_container(ContainerSpec(
            name="edge-only", image=IMAGE, command=serve, private=False, egress=True))
        await sandbox.run_container(ContainerSpec(
            name="agent", image=IMAGE, command=("sleep", "600"), private=False, sealed=True))
        fetch = ("import sys, urllib.request as u\n"
                 "for host in ('peer', 'edge-only'):\n"
                 "    try: print(host, u.urlopen(f'http://{host}:8080/', timeout=3).status)\n"
                 "    except Exception as e: print(host, 'failed', type(e).__name__)")
        out = ""
        for _ in range(20):  # the servers take a moment to listen
            out = await _exec_in(docker_client, sandbox, "agent", fetch)
            if "peer 200" in out:
                break
            await asyncio.sleep(0.3)
        assert out.splitlines()[0] == "peer 200", out
        assert out.splitlines()[1].startswith("edge-only failed"), out
    finally:
        await sandbox.terminate()
    owned = {"label": f"agentenv.sandbox={sandbox.id}"}
    assert docker_client.networks.list(filters=owned) == []


@pytest.mark.parametrize("make", [_docker_sandbox, _host_shell_sandbox],
                         ids=["docker", "docker-host"])
async def test_publishing_containers_started_beside_the_seal_all_join_it(
        docker_client: Any, run_id: str, make: Any) -> None:
    """An agent's deploy starts its sealed container beside publishing ones (its front, the
    model gateway): whichever comes first, every publishing container ends on the sealed
    network, where the agent reaches it."""
    sandbox = await make(run_id)
    names = [f"front{n}" for n in range(4)]
    try:
        await asyncio.gather(
            *(sandbox.run_container(ContainerSpec(
                name=name, image=IMAGE, command=("sleep", "600"), private=False,
                publish=(8080,))) for name in names[:2]),
            sandbox.run_container(ContainerSpec(
                name="agent", image=IMAGE, command=("sleep", "600"), private=False,
                sealed=True)),
            *(sandbox.run_container(ContainerSpec(
                name=name, image=IMAGE, command=("sleep", "600"), private=False,
                publish=(8080,))) for name in names[2:]))
        sealed = getattr(sandbox, "sealed_network", None) or sandbox.sealed_network_name
        for name in names:
            container = docker_client.containers.get(sandbox.container_name(name))
            assert sealed in container.attrs["NetworkSettings"]["Networks"], name
    finally:
        await sandbox.terminate()
    owned = {"label": f"agentenv.sandbox={sandbox.id}"}
    assert docker_client.networks.list(filters=owned) == []


def test_a_sealed_peer_is_an_edge_container_with_egress() -> None:
    with pytest.raises(ValueError, match="a sealed peer is an edge container with egress"):
        ContainerSpec(name="p", image=IMAGE, sealed_peer=True)
    with pytest.raises(ValueError, match="a sealed peer is an edge container with egress"):
        ContainerSpec(name="p", image=IMAGE, private=False, sealed=True, sealed_peer=True)


@pytest.mark.parametrize("make", [_docker_sandbox, _host_shell_sandbox],
                         ids=["docker", "docker-host"])
async def test_commands_and_files_inside_a_container_and_how_it_ended(
        docker_client: Any, run_id: str, make: Any) -> None:
    """What a task's own container needs from its sandbox: a command in it (folder,
    variables, user, bash where the image has it), its files read and written, and its end."""
    sandbox = await make(run_id)
    try:
        await sandbox.run_container(ContainerSpec(
            name="work", image=IMAGE, command=("sleep", "600")))
        done = await sandbox.container_exec(
            "work", 'echo "$GREETING from $(pwd) as $(id -un) in ${BASH_VERSION:+bash}"',
            cwd="/tmp", env={"GREETING": "hi"}, user="nobody")
        assert (done.exit_code, done.stdout.strip()) == (0, "hi from /tmp as nobody in bash")
        await sandbox.put_container_file("work", "/srv/data/note.txt", b"\x00binary\xff")
        assert await sandbox.get_container_file("work", "/srv/data/note.txt") == (
            b"\x00binary\xff")
        with pytest.raises(FileNotFoundError):
            await sandbox.get_container_file("work", "/srv/data/missing.txt")
        slow = await sandbox.container_exec("work", "sleep 30", timeout=1)
        assert slow.exit_code == 124
        assert await sandbox.container_status("work") == "running"
        await sandbox.run_container(ContainerSpec(
            name="job", image=IMAGE, command=("sh", "-c", "exit 3")))
        for _ in range(50):
            if (status := await sandbox.container_status("job")) != "running":
                break
            await asyncio.sleep(0.1)
        assert status == "exited with code 3"
    finally:
        await sandbox.terminate()


@pytest.mark.parametrize("subnets_taken", [False, True], ids=["planned", "engine-chosen"])
async def test_offline_containers_start_beside_the_dns_answerer(
        docker_client: Any, run_id: str, subnets_taken: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The private network takes a known /24, so the DNS answerer's address (``.2``) is fixed
    before it starts and an offline container is created with it at once, instead of after
    the answerer's start (a third of a warm echo-mcp deploy). When every subnet tried is held
    by another network, the engine picks one and the answerer is waited for, as before; either
    way an outside name fails fast."""
    from agentenv_docker_env import sandbox as docker_sandbox

    blocker = None
    if subnets_taken:  # the one subnet offered is held already
        blocker = docker_client.networks.create(
            f"{run_id}-blocker", driver="bridge", internal=True, labels={"agentenv.run": run_id},
            ipam={"Config": [{"Subnet": "10.254.77.0/24"}]})
        monkeypatch.setattr(docker_sandbox, "PRIVATE_SUBNETS", (10 << 24 | 254 << 16 | 77 << 8, 1))
        monkeypatch.setattr(docker_sandbox, "SUBNET_TRIES", 2)
    sandbox = await _docker_sandbox(run_id)
    try:
        assert isinstance(sandbox, docker_sandbox.DockerSandbox)
        config = docker_client.networks.get(sandbox.network).attrs["IPAM"]["Config"][0]
        if subnets_taken:
            assert sandbox.dns_planned is None
            assert config["Subnet"] != "10.254.77.0/24"
        else:
            prefix = config["Subnet"].rsplit(".", 1)[0]
            assert config["Subnet"].startswith("10.") and config["IPRange"] == f"{prefix}.128/25"
            assert sandbox.dns_planned == f"{prefix}.2"
        await sandbox.run_container(ContainerSpec(
            name="closed", image=IMAGE, command=("sleep", "600")))
        closed = docker_client.containers.get(sandbox.container_name("closed"))
        answerer = docker_client.containers.get(f"{sandbox.id}-dns")
        for _ in range(100):  # the answerer may still be starting beside it
            answerer.reload()
            if answerer.status == "running":
                break
            await asyncio.sleep(0.1)
        address = answerer.attrs["NetworkSettings"]["Networks"][sandbox.network]["IPAddress"]
        assert closed.attrs["HostConfig"]["Dns"] == [address]
        if not subnets_taken:
            assert address == sandbox.dns_planned
            mine = closed.attrs["NetworkSettings"]["Networks"][sandbox.network]["IPAddress"]
            assert int(mine.rsplit(".", 1)[1]) >= 128  # automatic addresses: the upper half
        lookup = ("import socket, time; t = time.time()\n"
                  "try: socket.getaddrinfo('example.com', 80)\n"
                  "except OSError: pass\n"
                  "print(round(time.time() - t, 2))")
        waited = float((await _exec_in(docker_client, sandbox, "closed", lookup)).strip())
        assert waited < 0.1, waited
    finally:
        await sandbox.terminate()
        if blocker is not None:
            blocker.remove()

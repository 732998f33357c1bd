"""The ``docker`` sandbox provider against the real engine: the contract, labels and teardown."""

from __future__ import annotations

import gc
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent_env.sandbox.base import ContainerSpec, SandboxSpec, SandboxUnsupported
from agentenv_docker_env.sandbox import DockerSandboxProvider

pytestmark = pytest.mark.docker

SERVE = ("python", "-m", "http.server", "9000")


def _leftovers(client: Any, label: str) -> tuple[list[Any], list[Any]]:
    filters = {"label": label}
    return client.containers.list(all=True, filters=filters), client.networks.list(filters=filters)


def _get(url: str) -> int:
    for _ in range(50):
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status
        except OSError:
            import time

            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


async def test_container_sandbox_contract(docker_client: Any, run_id: str) -> None:
    provider = DockerSandboxProvider()
    sandbox = await provider.create(
        SandboxSpec(name="box", mode="container", ports=(8000,), env_vars={"GREETING": "hey"},
                    labels={"agentenv.run": run_id})
    )
    result = await sandbox.exec("echo $GREETING; echo oops >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "hey\n", "oops\n")
    listed = await sandbox.exec(["ls", "/"], cwd="/")
    assert listed.ok and "etc" in listed.stdout

    await sandbox.put_file("/work/deep/er/note.txt", b"\x00binary\xff", mode=0o600)
    assert await sandbox.get_file("/work/deep/er/note.txt") == b"\x00binary\xff"
    assert (await sandbox.exec(["stat", "-c", "%a", "/work/deep/er/note.txt"])).stdout == "600\n"
    with pytest.raises(FileNotFoundError):
        await sandbox.get_file("/no/such/file")

    await sandbox.exec("cd /work && nohup python -m http.server 8000 >/dev/null 2>&1 &")
    url = await sandbox.expose(8000)
    assert url.startswith("http://127.0.0.1:")
    assert _get(url) == 200
    with pytest.raises(SandboxUnsupported):
        await sandbox.expose(8001)  # not published at start: refused with the reason

    timed_out = await sandbox.exec("sleep 30", timeout=1)
    assert timed_out.exit_code == 124

    container = docker_client.containers.get(sandbox.id)
    assert container.labels["agentenv.run"] == run_id
    assert container.labels["agentenv.sandbox"] == sandbox.id

    await sandbox.terminate()
    await sandbox.terminate()  # idempotent
    assert (await sandbox.exec("true")).exit_code == -1  # the transport is gone
    assert _leftovers(docker_client, f"agentenv.sandbox={sandbox.id}") == ([], [])


async def test_attach_from_the_id_alone(docker_client: Any, run_id: str) -> None:
    provider = DockerSandboxProvider()
    sandbox = await provider.create(
        SandboxSpec(name="findme", mode="container", labels={"agentenv.run": run_id})
    )
    await sandbox.put_file("/tmp/state", b"kept")
    sandbox_id = sandbox.id
    del sandbox
    gc.collect()

    again = await DockerSandboxProvider().attach(sandbox_id)
    assert again is not None and again.id == sandbox_id and again.mode == "container"
    assert await again.get_file("/tmp/state") == b"kept"
    found = await provider.list_sandboxes({"agentenv.run": run_id})
    assert [s.id for s in found] == [sandbox_id]
    await again.terminate()
    assert await provider.attach(sandbox_id) is None


@pytest.mark.parametrize("internal", [False, True], ids=["bridge", "internal+edge"])
async def test_vm_sandbox_runs_containers_on_a_private_network(
    docker_client: Any, run_id: str, tmp_path: Path, internal: bool
) -> None:
    provider = DockerSandboxProvider(internal_network=internal)
    sandbox = await provider.create(
        SandboxSpec(name="vm", mode="vm", labels={"agentenv.run": run_id})
    )
    urls = await sandbox.run_container(
        ContainerSpec(name="web", image="python:3.11-slim", command=SERVE, publish=(9000,),
                      env={"ROLE": "web"}, labels={"agentenv.env": "web"})
    )
    assert list(urls) == [9000] and urls[9000].startswith("http://127.0.0.1:")
    assert _get(urls[9000]) == 200
    quiet = await sandbox.run_container(
        ContainerSpec(name="backend", image="python:3.11-slim", command=SERVE)
    )
    assert quiet == {}  # nothing published: reachable only on the private network

    # Containers reach each other by name; an internal network has no way out, and then the
    # containers that publish also join the sandbox's edge network.
    probe = "import urllib.request as u; print(u.urlopen('http://backend:9000').status)"
    inside = await sandbox.exec(["python", "-c", probe])
    assert inside.stdout.strip() == "200", inside
    network = docker_client.networks.get(sandbox.id)
    assert network.attrs["Internal"] is internal
    assert network.attrs["Labels"]["agentenv.run"] == run_id
    networks = sorted(n.name for n in docker_client.networks.list(
        filters={"label": f"agentenv.sandbox={sandbox.id}"}))
    assert networks == ([sandbox.id, f"{sandbox.id}-edge"] if internal else [sandbox.id])

    # Every published port is bound on loopback only.
    for container in docker_client.containers.list(filters={"label": f"agentenv.run={run_id}"}):
        for bindings in (container.attrs["NetworkSettings"]["Ports"] or {}).values():
            for binding in bindings or ():
                assert binding["HostIp"] == "127.0.0.1", (container.name, binding)
    assert await sandbox.expose(9000) == urls[9000]
    assert "GET / HTTP" in await sandbox.container_logs("web")

    # A crashed run: only the id survives; teardown by label removes everything.
    sandbox_id = sandbox.id
    del sandbox
    found = await provider.attach(sandbox_id)
    assert found is not None and found.mode == "vm"
    await found.terminate()
    assert _leftovers(docker_client, f"agentenv.run={run_id}") == ([], [])
    await found.terminate()


async def test_vm_sandbox_builds_with_content_tags(
    docker_client: Any, run_id: str, tmp_path: Path, image_names: list[str]
) -> None:
    context = tmp_path / "ctx"  # its own folder: tmp_path holds the test's state root
    context.mkdir()
    (context / "Dockerfile").write_text("FROM python:3.11-slim\nCMD [\"python\", \"-V\"]\n")
    sandbox = await DockerSandboxProvider().create(
        SandboxSpec(name="vmb", mode="vm", labels={"agentenv.run": run_id})
    )
    try:
        tag = await sandbox.build_image(str(context), f"sb-{run_id}", labels={"x": "1"})
        image_names.append(tag)
        assert tag.startswith(f"agentenv/sb-{run_id}:")
        assert await sandbox.build_image(str(context), f"sb-{run_id}", labels={}) == tag
    finally:
        await sandbox.terminate()


async def test_refuses_network_policies(docker_client: Any) -> None:
    with pytest.raises(SandboxUnsupported):
        await DockerSandboxProvider().create(
            SandboxSpec(name="p", mode="container", network_policy="deny-all")
        )


async def test_every_container_has_a_memory_limit(docker_client: Any, run_id: str) -> None:
    """Issue 31, class 6: no container runs without a memory limit: the sandbox's size, else
    the default; a container's own size wins; an attached sandbox keeps its size."""
    from agent_env.sandbox.base import DEFAULT_MEMORY_MB

    def limit(name: str) -> int:
        (one,) = docker_client.containers.list(filters={"label": [
            f"agentenv.run={run_id}", f"agentenv.container={name}"]})
        return int(one.attrs["HostConfig"]["Memory"]) // 2**20

    provider = DockerSandboxProvider()
    plain = await provider.create(SandboxSpec(name="m1", mode="vm",
                                              labels={"agentenv.run": run_id}))
    sized = await provider.create(SandboxSpec(name="m2", mode="vm", memory_mb=96,
                                              labels={"agentenv.run": run_id}))
    sleep = ("sleep", "60")
    try:
        await plain.run_container(ContainerSpec(name="a", image="python:3.11-slim",
                                                command=sleep))
        await sized.run_container(ContainerSpec(name="b", image="python:3.11-slim",
                                                command=sleep))
        await sized.run_container(ContainerSpec(name="c", image="python:3.11-slim",
                                                command=sleep, memory_mb=48))
        again = await provider.attach(sized.id)
        assert again is not None
        await again.run_container(ContainerSpec(name="d", image="python:3.11-slim",
                                                command=sleep))
        assert (limit("a"), limit("b"), limit("c"), limit("d")) == (
            DEFAULT_MEMORY_MB, 96, 48, 96)
    finally:
        await plain.terminate()
        await sized.terminate()
    box = await provider.create(SandboxSpec(name="m3", mode="container", memory_mb=64,
                                            labels={"agentenv.run": run_id}))
    try:
        hog = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('survived')"
        result = await box.exec(["python", "-c", hog])
        assert "survived" not in result.stdout and result.exit_code != 0
    finally:
        await box.terminate()

"""The ``ray`` sandbox provider: sandboxes made on the nodes of a Ray cluster, driven from here.

Where the ``ray`` runner sends whole task runs to the nodes, this provider sends only the
sandboxes: the engine, the records and the caller stay in this process. It is what the episode
API uses to spread a trainer's envs over a cluster (``EpisodeSpec.from_task(task,
sandbox="ray")``, or ``[sandbox] default = "ray"``): the trainer's loop runs on the head node,
each episode's env (its containers and gateway) runs on a node with a free slot, and the
trainer reaches it through the gateway URL, as it would on one machine.

How a sandbox travels:

1. a slot: a one-bundle placement group asking for one ``agentenv_env_slots`` (the resource
   the runner uses too), so a node never holds more sandboxes from this provider than it
   declared, whichever drivers share the cluster;
2. the node's :class:`SandboxHost` actor (one per node per provider, pinned there) creates the
   sandbox with the node's own providers (``inner``, default ``docker``) and keeps it;
3. every call on the returned :class:`RaySandbox` (exec, files, image builds, containers) runs
   in that actor. A build context is sent along as a tar archive, so the node needs no copy of
   this machine's files. URLs that name the node's loopback are rewritten to the node's address
   when the node is another machine; its engine must then publish on an address this machine
   reaches (docker_env publishes on 127.0.0.1, so today that means a one-machine cluster or a
   network route to the node's loopback: see the README).

A node that dies takes its sandboxes with it: the next call raises :class:`SandboxError` (an
infrastructure error), and ``terminate`` gives the slot back without raising. Each sandbox is
terminated by its run's teardown like any other; the host actors belong to this process (Ray
ends them when it exits), and each reaps, when it starts, sandboxes on its node whose creating
process died (a driver killed with ``kill -9``), as ``agent-env gc`` on that node would.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from agent_env.api import (
    ContainerSpec,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    UserError,
    choose_provider,
    find_leftovers,
    open_provider,
    remove_leftovers,
)
from agentenv_ray_runner.cluster import NAMESPACE, SLOT_RESOURCE, actor_env, join_cluster

LOOPBACKS = ("127.0.0.1", "localhost")


class SandboxHost:
    """One per node per provider (a Ray actor, see :func:`_remote_host`): makes sandboxes
    with the node's providers and runs the calls made on them."""

    def __init__(self, inner: list[str]) -> None:
        import ray

        self.inner = inner
        self.sandboxes: dict[str, Sandbox] = {}
        self.address = ray.util.get_node_ip_address()

    async def start(self) -> str:
        """Reap what sandbox owners that died left on this node; returns the node's address."""
        found, _ = await find_leftovers({})
        await remove_leftovers([f for f in found if f.remove])
        return str(self.address)

    async def create(self, spec: SandboxSpec
                     ) -> tuple[str, str, str | None, str | None, dict[str, Any]]:
        provider = open_provider(choose_provider(self.inner))
        sandbox = await provider.create(spec)
        self.sandboxes[sandbox.id] = sandbox
        return (sandbox.id, sandbox.provider_name, sandbox.env_isolation(),
                sandbox.agent_isolation(), sandbox.describe())

    async def call(self, sandbox_id: str, method: str, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        sandbox = self.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise SandboxError(f"sandbox {sandbox_id} is not up on this node")
        return await getattr(sandbox, method)(*args, **kwargs)

    async def build_image(self, sandbox_id: str, archive: bytes, tag: str,
                          labels: dict[str, str]) -> str:
        """Unpack the context sent from the driver and build it with the node's sandbox."""
        folder = tempfile.mkdtemp(prefix="agentenv-ray-context-")
        try:
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(folder, filter="data")
            return str(await self.call(sandbox_id, "build_image", (folder, tag),
                                       {"labels": labels}))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    async def terminate(self, sandbox_id: str) -> None:
        sandbox = self.sandboxes.pop(sandbox_id, None)
        if sandbox is not None:
            await sandbox.terminate()


#: Where the runtime keeps :class:`SandboxHost` as a Ray actor class (``current().state``).
REMOTE_HOST_STATE = "agentenv_ray_runner.remote_host"


def _remote_host() -> Any:
    """:class:`SandboxHost` as a Ray actor class, made on first use (``ray`` is imported then)
    and kept by the runtime."""
    from agent_env.api import current

    state = current().state
    if REMOTE_HOST_STATE not in state:
        import ray

        state[REMOTE_HOST_STATE] = ray.remote(SandboxHost)
    return state[REMOTE_HOST_STATE]


class RaySandbox(Sandbox):
    """A sandbox on a node of the cluster; each method runs in that node's host actor."""

    provider_name = "ray"

    def __init__(self, host: Any, node_id: str, node_address: str, local_address: str,
                 slot: Any, created: tuple[str, str, str | None, str | None, dict[str, Any]]
                 ) -> None:
        self.host = host
        self.node_id = node_id
        self.node_address = node_address
        self.local_address = local_address
        self.slot: Any = slot  # the placement group holding this sandbox's env slot
        self.id, self.inner_provider, self._isolation, self._seal, self._describe = created

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        import ray

        try:
            return await self.host.call.remote(self.id, method, args, kwargs)
        except ray.exceptions.RayActorError as exc:
            raise SandboxError(self._gone(exc)) from None
        except ray.exceptions.RayTaskError as exc:
            raise _cause(exc) from None

    def _gone(self, exc: BaseException) -> str:
        return (f"the Ray node {self.node_id[:12]} holding sandbox {self.id} is gone "
                f"({type(exc).__name__})")

    def _url(self, url: str) -> str:
        """A URL the node handed back, as this machine reaches it."""
        if self.node_address == self.local_address:
            return url
        for loopback in LOOPBACKS:
            url = url.replace(f"//{loopback}:", f"//{self.node_address}:")
        return url

    async def exec(self, command: str | list[str], *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None
                   ) -> ExecResult:
        result: ExecResult = await self._call("exec", command, cwd=cwd, env=env,
                                              timeout=timeout)
        return result

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        await self._call("put_file", path, data, mode=mode)

    async def get_file(self, path: str) -> bytes:
        data: bytes = await self._call("get_file", path)
        return data

    async def expose(self, port: int) -> str:
        return self._url(str(await self._call("expose", port)))

    async def build_image(self, context: str, tag: str, *, labels: dict[str, str]) -> str:
        import ray

        archive = await asyncio.to_thread(_tar, Path(context))
        try:
            ref = await self.host.build_image.remote(self.id, archive, tag, labels)
        except ray.exceptions.RayActorError as exc:
            raise SandboxError(self._gone(exc)) from None
        except ray.exceptions.RayTaskError as exc:
            raise _cause(exc) from None
        return str(ref)

    async def run_container(self, spec: ContainerSpec) -> dict[int, str]:
        urls: dict[int, str] = await self._call("run_container", spec)
        return {port: self._url(url) for port, url in urls.items()}

    async def container_logs(self, name: str, *, tail: int = 50) -> str:
        return str(await self._call("container_logs", name, tail=tail))

    async def container_status(self, name: str) -> str | None:
        status = await self._call("container_status", name)
        return None if status is None else str(status)

    async def container_health(self, name: str) -> str | None:
        health = await self._call("container_health", name)
        return None if health is None else str(health)

    async def put_container_file(self, name: str, path: str, data: bytes, *,
                                 mode: int = 0o644) -> None:
        await self._call("put_container_file", name, path, data, mode=mode)

    async def container_exec(self, name: str, command: str | list[str], *,
                             cwd: str | None = None, env: dict[str, str] | None = None,
                             timeout: float | None = None,
                             user: str | None = None) -> ExecResult:
        result: ExecResult = await self._call("container_exec", name, command, cwd=cwd,
                                              env=env, timeout=timeout, user=user)
        return result

    async def get_container_file(self, name: str, path: str) -> bytes:
        data: bytes = await self._call("get_container_file", name, path)
        return data

    def env_isolation(self) -> str | None:
        return self._isolation

    def agent_isolation(self) -> str | None:
        return self._seal

    def describe(self) -> dict[str, Any]:
        return {**self._describe, "provider": "ray", "inner_provider": self.inner_provider,
                "ray_node_id": self.node_id}

    async def terminate(self) -> None:
        """Terminate on the node and give the slot back; a node already gone took it along."""
        import ray
        from ray.util.placement_group import remove_placement_group

        try:
            await self.host.terminate.remote(self.id)
        except ray.exceptions.RayActorError:
            pass  # the node is gone, and its sandboxes with it (or `agent-env gc` there)
        finally:
            if self.slot is not None:
                remove_placement_group(self.slot)
                self.slot = None


class RaySandboxProvider(SandboxProvider):
    """Sandboxes on the nodes of a Ray cluster (see the module docstring)."""

    name: ClassVar[str] = "ray"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")

    def __init__(self, *, address: str | None = None, inner: str = "docker",
                 env_slots: int = 4, namespace: str = NAMESPACE,
                 slot_timeout: float = 600.0) -> None:
        """``address``: the cluster (default: ``[runner.config] address``; none starts a local
        one with ``env_slots`` slots); ``inner``: the provider chain each node creates with
        (``docker`` by default; never ``ray``); ``slot_timeout``: seconds a new sandbox waits
        for a free slot before failing (an infrastructure error, not a hang)."""
        from agent_env.api import split_chain

        chain = split_chain(inner)
        if not chain or "ray" in chain:
            raise UserError(f"[sandbox.providers.ray.config] inner must name the providers "
                            f"each node uses (such as \"docker\"), not {inner!r}")
        if env_slots < 1:
            raise UserError(f"[sandbox.providers.ray.config] env_slots must be >= 1, "
                            f"not {env_slots}")
        self.address = address
        self.inner = chain
        self.env_slots = env_slots
        self.namespace = namespace
        self.slot_timeout = slot_timeout
        self.hosts: dict[str, tuple[Any, str]] = {}
        self._lock = asyncio.Lock()

    @classmethod
    def availability(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            return "ray is not installed (pip install 'agentenv-framework[ray]')"
        return None

    def _connect(self) -> None:
        import ray

        if ray.is_initialized():
            return
        address = self.address
        if address is None:
            from agent_env.api import current

            runner = current().config.section("runner").get("config", {})
            address = runner.get("address") if isinstance(runner, dict) else None
        join_cluster(address, self.env_slots, self.namespace)

    async def _host(self, node_id: str) -> tuple[Any, str]:
        async with self._lock:
            found = self.hosts.get(node_id)
            if found is None:
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                host = _remote_host().options(
                    num_cpus=0, max_concurrency=1000, runtime_env={"env_vars": actor_env()},
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote(self.inner)
                found = host, str(await host.start.remote())
                self.hosts[node_id] = found
            return found

    async def create(self, spec: SandboxSpec) -> Sandbox:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        self.check_spec(spec)
        self._connect()
        slot = placement_group([{SLOT_RESOURCE: 1}], strategy="STRICT_PACK")
        node_id = ""
        try:
            try:
                await asyncio.wait_for(slot.ready(), self.slot_timeout)
            except TimeoutError:
                raise SandboxError(
                    f"no {SLOT_RESOURCE} slot came free in the Ray cluster within "
                    f"{self.slot_timeout:g}s for sandbox {spec.name} (envs kept up hold theirs: "
                    "with reuse_envs, set max_envs to at most the cluster's slots)") from None
            node_id = ray.util.placement_group_table(slot)["bundles_to_node_id"][0]
            host, node_address = await self._host(node_id)
            created = await host.create.remote(spec)
        except ray.exceptions.RayActorError as exc:
            remove_placement_group(slot)
            self.hosts.pop(node_id, None)
            raise SandboxError(f"the Ray node chosen for sandbox {spec.name} went away while "
                               f"creating it ({type(exc).__name__})") from None
        except ray.exceptions.RayTaskError as exc:
            remove_placement_group(slot)
            raise _cause(exc) from None
        except BaseException:
            remove_placement_group(slot)
            raise
        return RaySandbox(host, node_id, node_address, ray.util.get_node_ip_address(), slot,
                          created)

    def check_spec(self, spec: SandboxSpec) -> None:
        """Only the mode here: the node's own provider judges the rest (network policy...)."""
        if spec.mode not in self.modes:
            super().check_spec(spec)

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        """Sandboxes live in the host actors of the process that made them: none to attach."""
        return None


def _cause(exc: Any) -> BaseException:
    """What a node raised, as itself (a SandboxError stays one), else a SandboxError."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, Exception):
        return cause
    return SandboxError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def _tar(folder: Path) -> bytes:
    """The build context as a tar archive (symlinks kept as links, as docker's client does)."""
    if not folder.is_dir():
        raise SandboxError(f"build context {folder} is not a folder")
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=os.path.relpath(path, folder), recursive=False)
    return out.getvalue()

"""The ``docker`` sandbox provider: containers and private networks on the local engine.

``mode="container"``: one long-lived container from ``spec.image`` (kept alive by a sleep loop
under docker-init) that commands are exec'd into. ``mode="vm"``: a VM-like host made of two
bridge networks of its own, on which containers reach each other by name and publish nothing
unless asked (``ContainerSpec.publish``, on 127.0.0.1). ``run_container`` starts containers
there; exec/put/get go to a helper *host* container created on first use (so a deploy that only
runs containers pays nothing for it).

The two networks (``ContainerSpec.private`` / ``edge``): the *private* one (named after the
sandbox) is ``internal`` (no route out) and its bridge has no address on the host
(``com.docker.network.bridge.inhibit_ipv4``): Docker's internal networks still let host
processes reach their members through the bridge's address, which is how a process on the host
could call an env server without the gateway's token. Other containers reach it neither
(Docker's isolation rules drop traffic between bridges). The *edge* one (``<id>-edge``) is a
plain bridge: containers that publish ports join it (Docker publishes only through a network
with a route out), and so do those asking for ``egress``. The gateway is on both; env servers
only on the private one; an agent that is not sealed only on the edge.

A sealed container (an agent, ``ContainerSpec.sealed``) gets a third network, ``<id>-sealed``,
made on first use: internal and without a host address like the private one, and joined by
every container of the sandbox that publishes a port (the env gateway, the model gateway, agent
fronts), those already running and those started after, and by a ``sealed_peer`` (an
allow-listed agent's egress proxy). The sealed container is on it alone, so it reaches the
gateways (and such a proxy) by name and nothing else: not the env servers, not the host, not
the internet, not another sandbox.

``internal_network = false`` (provider config) puts everything on one plain bridge instead (an
env server that must reach out needs it); the env's run record then says its env servers are
not isolated (:meth:`DockerSandbox.env_isolation`).

Everything created carries ``agentenv.sandbox=<id>`` and ``agentenv.run`` (from
``spec.labels``), so :meth:`DockerSandboxProvider.attach` finds a sandbox from its id alone and
``terminate`` removes it by label, also after a crash. ``agentenv.owner`` (the creating process,
see ``agent-env gc``) and ``agentenv.expires`` (from ``ttl_seconds``) let
``agent-env gc`` tell a dead run's leftovers from a live run's sandboxes. Ports are published on
127.0.0.1 only, on host ports the engine picks free at start (no race between choosing and
binding).

Committed containers (the contract's ``can_commit``, for forked episodes): ``commit_containers``
saves each env server this sandbox started (private network only: not the gateway, not an
agent) as an image ``agentenv/fork-<container>:<random>`` with ``docker commit``, its files only
(a commit keeps no process memory and no volume); ``start_from_committed`` makes a later
``run_container`` of the same container name and source image start the committed image;
``remove_committed`` removes the images once their containers are gone.

The SDK is blocking: every async method runs it in worker threads, through :func:`settle`, which
lets a blocking call finish even when the caller is cancelled (Ctrl-C during a deploy), so
whatever the call created exists, labelled, before teardown looks for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import os
import posixpath
import secrets
import signal
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from agent_env.api import (
    BUILDER,
    BUILDER_LABEL,
    DEFAULT_MEMORY_MB,
    CommittedImage,
    ConfigError,
    ContainerSpec,
    ExecResult,
    Healthcheck,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxUnsupported,
    VolumeMount,
    image_slug,
    ownership_labels,
    shell_argv,
    side_by_side,
)
from agentenv_docker_env import RUN_LABEL, SANDBOX_LABEL
from agentenv_docker_env.engine import daemon_problem, docker_client

PROVIDER_LABEL = "agentenv.provider"
MODE_LABEL = "agentenv.mode"
ROLE_LABEL = "agentenv.role"  # main | host | container | network
NAME_LABEL = "agentenv.container"
#: on a container that publishes ports: the seal finds it even before it starts (a created
#: container lists no published port yet)
PUBLISHES_LABEL = "agentenv.publishes"
HOST_IMAGE_LABEL = "agentenv.host_image"
PORTS_LABEL = "agentenv.ports"
#: the sandbox's memory limit per container, MiB (its spec's ``memory_mb`` or the default)
MEMORY_LABEL = "agentenv.memory_mb"
LOOPBACK = "127.0.0.1"
DEFAULT_IMAGE = "python:3.11-slim"
EDGE_LABEL = "agentenv.edge"  # "1" when the sandbox has an internal network plus an edge one
#: On a durable volume (a ``VolumeMount(durable=True)``): no sandbox's, kept until removed.
DURABLE_LABEL = "agentenv.durable"
#: A private container's resolver options when it has no route out: one try, one second (in
#: case the sandbox's own DNS answerer is gone).
FAST_FAIL_DNS = ["timeout:1", "attempts:1"]
#: The sandbox's DNS answerer (see ``DockerSandbox._dns_address``): answers every name it is
#: asked "no such name" (NXDOMAIN) at once. Docker's resolver asks it only for names that are
#: not the sandbox's own containers, which Docker answers itself.
NXDOMAIN_SERVER = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 53))
while True:
    q, a = s.recvfrom(4096)
    if len(q) < 12:
        continue
    i = 12
    while i < len(q) and q[i]:
        i += 1 + q[i]
    s.sendto(q[:2] + bytes([0x80 | (q[2] & 0x79), 0x83]) + q[4:6] + bytes(6)
             + q[12:min(i + 5, len(q))], a)
"""
#: The internal network's bridge gets no address on the host, so the host has no route to it.
NO_HOST_ADDRESS = {"com.docker.network.bridge.inhibit_ipv4": "true"}
#: Where a sandbox's private (internal) network takes its /24: a random one of these 8,192, so
#: its DNS answerer can have a known address (``.2``) before it starts. The engine refuses a
#: subnet another network holds (another is tried); with no host address on the bridge, a
#: host route into the same range does not matter.
PRIVATE_SUBNETS = (10 << 24 | 224 << 16, 1 << 13)  # 10.224.0.0/11: first address, /24s in it
#: Subnets tried before the engine picks one itself (then the answerer's address is known only
#: once it runs, and an offline container waits for its start, as before).
SUBNET_TRIES = 6
KEEP_ALIVE = ["/bin/sh", "-c", "while :; do sleep 3600; done"]
#: At most this many engine calls at once in one teardown (the SDK's pool holds 10 connections).
PARALLEL_CALLS = 8
#: Repository of committed env servers: ``agentenv/fork-<container>:<random>``.
COMMIT_REPOSITORY = "agentenv/fork"

T = TypeVar("T")


async def settle(*calls: Callable[[], T]) -> list[T]:
    """Run blocking calls side by side in threads and wait for ALL of them, then raise the first
    error (:func:`agent_env.api.side_by_side`: what they create is there, and labelled, when
    teardown lists the sandbox)."""
    return await side_by_side(*(asyncio.to_thread(call) for call in calls))


def _side_by_side(calls: list[Callable[[], Any]]) -> list[BaseException | None]:
    """Blocking: run ``calls`` in a small pool; each one's error (or None), in order."""
    if len(calls) <= 1:
        outcomes: list[BaseException | None] = []
        for call in calls:
            try:
                call()
                outcomes.append(None)
            except Exception as exc:
                outcomes.append(exc)
        return outcomes
    with concurrent.futures.ThreadPoolExecutor(min(len(calls), PARALLEL_CALLS)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.exception() for f in futures]


def _gone(exc: BaseException) -> bool:
    import docker.errors

    return isinstance(exc, docker.errors.NotFound)


def _transport_lost(exc: BaseException) -> bool:
    import docker.errors
    import requests

    return isinstance(exc, docker.errors.APIError | requests.exceptions.RequestException)


def _published(attrs: dict[str, Any]) -> dict[int, str]:
    """``{container port: http://127.0.0.1:host_port}`` from a container's inspect data."""
    ports = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
    urls: dict[int, str] = {}
    for key, bindings in ports.items():
        for binding in bindings or ():
            if binding.get("HostIp") in (LOOPBACK, "") and binding.get("HostPort"):
                urls[int(key.split("/")[0])] = f"http://{LOOPBACK}:{binding['HostPort']}"
                break
    return urls


def _docker_healthcheck(check: Healthcheck | None) -> dict[str, Any] | None:
    """The Engine API's healthcheck object (durations in nanoseconds)."""
    if check is None:
        return None
    ns = 1_000_000_000
    return {"test": list(check.test), "interval": int(check.interval * ns),
            "timeout": int(check.timeout * ns), "retries": check.retries,
            "start_period": int(check.start_period * ns)}


def _in_sandbox_path(path: str, workdir: str = "/") -> str:
    return posixpath.normpath(posixpath.join(workdir or "/", path))


class DockerSandbox(Sandbox):
    """A sandbox on the local engine; rebuilt from labels alone by ``attach``."""

    provider_name = "docker"
    can_commit = True

    def __init__(
        self,
        client: Any,
        sandbox_id: str,
        mode: str,
        *,
        labels: dict[str, str],
        host_image: str = DEFAULT_IMAGE,
        ports: tuple[int, ...] = (),
        env_vars: dict[str, str] | None = None,
    ) -> None:
        self.client = client
        self.id = sandbox_id
        self.mode = mode
        self.labels = labels
        self.host_image = host_image
        self.ports = ports
        self.env_vars = env_vars or {}
        self._names: set[str] = set()  # containers this object started (a rerun replaces them)
        #: the specs this object started, by ``ContainerSpec.name`` (what a commit saves)
        self._specs: dict[str, ContainerSpec] = {}
        #: committed images to start instead of their source (start_from_committed), by name
        self._committed: dict[str, CommittedImage] = {}
        self._started_committed: set[str] = set()
        #: set once the sealed network exists (made on first use; publishing containers then
        #: join it at create): the connecting of those there were (see _seal_blocking)
        self._sealing: concurrent.futures.Future[None] | None = None
        self._outbound = False
        # reentrant: a publishing container holds it from its joins to its create, and may
        # make the outbound network meanwhile
        self._seal_lock = threading.RLock()
        #: the DNS answerer's address ("" when it could not start; None before its first use)
        self._dns: str | None = None
        self._dns_lock = threading.Lock()
        #: the answerer's address on a private network of a known subnet (see
        #: ``PRIVATE_SUBNETS``), fixed before it starts; None: the engine chose the subnet
        self.dns_planned: str | None = None
        self._dns_warming = False

    @property
    def memory_mb(self) -> int:
        """Every container of this sandbox is limited to this (MiB) unless its spec says."""
        try:
            return int(self.labels.get(MEMORY_LABEL) or DEFAULT_MEMORY_MB)
        except ValueError:
            return DEFAULT_MEMORY_MB

    # -- names -----------------------------------------------------------------------------

    @property
    def network(self) -> str:
        return self.id

    @property
    def edge_network(self) -> str:
        return f"{self.id}-edge"

    @property
    def sealed_network(self) -> str:
        return f"{self.id}-sealed"

    @property
    def outbound_network(self) -> str:
        return f"{self.id}-out"

    @property
    def has_edge(self) -> bool:
        return self.labels.get(EDGE_LABEL) == "1"

    @property
    def shell_container(self) -> str:
        """The container exec/put/get talk to: the main one, or the vm's helper host."""
        return self.id if self.mode == "container" else f"{self.id}-host"

    def container_name(self, name: str) -> str:
        return f"{self.id}-{image_slug(name)}"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "provider": self.provider_name, "mode": self.mode,
                "network": self.network if self.mode == "vm" else None}

    def env_isolation(self) -> str | None:
        if self.mode == "vm" and self.has_edge:
            return None
        if self.mode != "vm":
            return "a container-mode docker sandbox runs no env servers behind a gateway"
        return ("the docker provider's internal_network = false puts env servers on a plain "
                "bridge: the host and the sandbox's other containers reach them without the "
                "gateway's token")

    def agent_isolation(self) -> str | None:
        if self.mode == "vm" and self.has_edge:
            return None
        if self.mode != "vm":
            return "a container-mode docker sandbox runs no containers of its own"
        return ("the docker provider's internal_network = false gives the sandbox one plain "
                "bridge, so no network reaches only the gateways")

    def _remember(self, name: str) -> None:
        self._names.add(name)

    def _labels(self, role: str, **extra: str) -> dict[str, str]:
        return {**self.labels, ROLE_LABEL: role, **extra}

    # -- containers ------------------------------------------------------------------------

    def _create_started(
        self,
        name: str,
        image: str,
        *,
        role: str,
        command: list[str] | None = None,
        entrypoint: list[str] | None = None,
        env: dict[str, str] | None = None,
        publish: tuple[int, ...] = (),
        alias: str | None = None,
        extra_labels: dict[str, str] | None = None,
        host_options: dict[str, Any] | None = None,
        memory_mb: int | None = None,
        private: bool = True,
        edge: bool = False,
        egress: bool = False,
        sealed: bool = False,
        healthcheck: Healthcheck | None = None,
        volumes: tuple[VolumeMount, ...] = (),
        outbound: bool = False,
        sealed_peer: bool = False,
    ) -> dict[int, str]:
        """Create and start a container, attached to the sandbox's networks; returns its URLs.

        ``private``/``edge``: which of the two networks it joins (both for the gateway); with
        no edge network (``internal_network = false``) there is one, and everything is on it.
        ``sealed``: the sealed network alone; a publishing container also joins the sealed
        network once it exists.
        ``egress`` also names the host ``host.docker.internal`` (a model upstream on the host).
        ``memory_mb``: its memory limit (default: the sandbox's, :attr:`memory_mb`).
        ``volumes``: named volumes of this sandbox (made on first use, labelled as its own so
        the teardown removes them).
        ``outbound``: a private container that also joins the outbound network (a route out).
        ``sealed_peer``: also the sealed network, publishing or not (made before the call).
        A private container without a route out gets a resolver that gives up on an outside
        name after one try of one second (Docker's own waits 10 s or more per lookup, on a
        network where every outside lookup fails), so a task's script fails fast offline.
        """
        import docker.errors

        api = self.client.api
        limit = f"{memory_mb or self.memory_mb}m"  # swap included: the limit is the limit
        binds = {self._volume(mount): {"bind": mount.path,
                                       "mode": "ro" if mount.read_only else "rw"}
                 for mount in volumes}
        offline = (self.mode == "vm" and self.has_edge and private and not outbound
                   and not sealed and not publish and not egress and role != "dns")
        answerer = None
        if offline and self.dns_planned is not None:
            # its address is known: this container starts beside it, not after it
            self.warm_dns()
            answerer = self.dns_planned
        elif offline:
            answerer = self._dns_address()
        host_config = api.create_host_config(
            port_bindings={port: (LOOPBACK, None) for port in publish},
            init=True,
            extra_hosts={"host.docker.internal": "host-gateway"} if egress else None,
            binds=binds or None,
            dns=[answerer] if answerer else None,
            dns_opt=FAST_FAIL_DNS if offline else None,
            **{"mem_limit": limit, "memswap_limit": limit, **(host_options or {})},
        )
        networking = None
        aliases = [alias] if alias else None
        joins: list[str] = []
        # A publishing container decides whether it joins the sealed network and is created
        # under the seal's lock: a seal made meanwhile either finds it (created, maybe not
        # started) or was made before it looked, so it joins at create.
        guard = self._seal_lock if publish else contextlib.nullcontext()
        with guard:
            if self.mode == "vm":
                edge = edge or bool(publish) or not private
                if sealed:
                    joins = [self.sealed_network]
                elif not self.has_edge:
                    joins = [self.network]
                else:  # Docker 20.10's create takes one network; the others are connected after
                    joins = [self.network] * private + [self.edge_network] * edge
                    if (publish and self._sealing is not None) or sealed_peer:
                        joins.append(self.sealed_network)
                    if outbound:
                        self._outbound_blocking()
                        joins.append(self.outbound_network)
                address = self.dns_planned if role == "dns" and joins[0] == self.network else None
                networking = api.create_networking_config(
                    {joins[0]: api.create_endpoint_config(aliases=aliases, ipv4_address=address)}
                )
            try:  # no image lookup first: a missing image is the create call's 404
                created = api.create_container(
                    image,
                    command=command,
                    entrypoint=entrypoint,
                    name=name,
                    environment=env or None,
                    labels=self._labels(role, **(extra_labels or {}),
                                        **({PUBLISHES_LABEL: "1"} if publish else {})),
                    ports=list(publish) or None,
                    host_config=host_config,
                    networking_config=networking,
                    healthcheck=_docker_healthcheck(healthcheck),
                )
            except docker.errors.ImageNotFound:
                raise SandboxError(
                    f"image {image} is not on the local Docker engine (build or pull it first)"
                ) from None
        self._remember(name)
        try:
            for network in joins[1:]:
                api.connect_container_to_network(created["Id"], network, aliases=aliases)
            api.start(created["Id"])
            if not publish:
                return {}  # nothing to look up: saves a round trip per env container
            return _published(api.inspect_container(created["Id"]))
        except BaseException:
            api.remove_container(created["Id"], force=True)
            raise

    def _volume(self, mount: VolumeMount) -> str:
        """The engine's volume for ``mount``, made on first use: this sandbox's (labelled as
        its own, so its teardown removes it), or a durable one under its own name."""
        import docker.errors

        if mount.durable:
            full, labels = mount.name, {DURABLE_LABEL: "1"}
        else:
            full, labels = self.container_name(f"vol-{mount.name}"), self._labels("volume")
        try:
            self.client.api.inspect_volume(full)
        except docker.errors.NotFound:
            self.client.api.create_volume(full, labels=labels)
        return full

    def _ensure_shell_container(self) -> Any:
        """The container to exec into (created on first use for vm sandboxes)."""
        import docker.errors

        try:
            return self.client.containers.get(self.shell_container)
        except docker.errors.NotFound:
            if self.mode == "container":
                raise
        try:
            self._create_started(
                self.shell_container, self.host_image, role="host", entrypoint=KEEP_ALIVE,
                command=[], env=self.env_vars, publish=self.ports, alias="host", edge=True,
            )
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: a concurrent call created it first
                raise
        return self.client.containers.get(self.shell_container)

    # -- the contract ----------------------------------------------------------------------

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        state: dict[str, Any] = {}
        try:
            task = asyncio.to_thread(self._exec_blocking, argv, cwd, env, state)
            result = await asyncio.wait_for(task, timeout) if timeout else await task
        except TimeoutError:
            self._kill_exec(state)
            return ExecResult(124, "", f"timed out after {timeout} s")
        if isinstance(command, str) and result.exit_code in (126, 127) and (
            '"bash"' in result.stdout + result.stderr
        ):  # images without bash (alpine): fall back to sh
            return await self.exec(["/bin/sh", "-c", command], cwd=cwd, env=env, timeout=timeout)
        return result

    def _exec_blocking(
        self, argv: list[str], cwd: str | None, env: dict[str, str] | None, state: dict[str, Any],
        target: str | None = None, user: str | None = None,
    ) -> ExecResult:
        """``argv`` in the shell container, or in container ``target`` (a full name)."""
        api = self.client.api
        try:
            container_id = target or self._ensure_shell_container().id
            exec_id = api.exec_create(
                container_id, argv, workdir=cwd, environment=env or None, stdout=True,
                stderr=True, user=user or "",
            )["Id"]
            state["exec_id"] = exec_id
            stdout, stderr = api.exec_start(exec_id, demux=True)
            code = api.exec_inspect(exec_id).get("ExitCode")
        except Exception as exc:
            if target is not None and getattr(exc, "status_code", None) in (404, 409):
                raise SandboxError(f"container {target} of sandbox {self.id} is gone or "
                                   "stopped") from None
            if _transport_lost(exc):
                return ExecResult(-1, "", f"lost the sandbox {self.id}: {exc}")
            raise
        text_out = (stdout or b"").decode("utf-8", "replace")
        text_err = (stderr or b"").decode("utf-8", "replace")
        if code is None:  # the exec never finished: the container went away under it
            return ExecResult(-1, text_out, text_err or "the command did not finish")
        return ExecResult(int(code), text_out, text_err)

    def _kill_exec(self, state: dict[str, Any]) -> None:
        """Kill a timed-out exec's process (Docker has no API for it; the pid is a host pid)."""
        exec_id = state.get("exec_id")
        if exec_id is None:
            return
        try:
            pid = self.client.api.exec_inspect(exec_id).get("Pid")
            if pid and Path("/var/run/docker.sock").exists():
                os.kill(int(pid), signal.SIGKILL)
        except Exception:
            pass

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        await asyncio.to_thread(self._put_blocking, path, data, mode)

    def _put_blocking(self, path: str, data: bytes, mode: int) -> None:
        container = self._ensure_shell_container()
        target = _in_sandbox_path(path, container.attrs.get("Config", {}).get("WorkingDir", "/"))
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(target.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        # Extracting at "/" lets the engine create missing parent folders.
        if not container.put_archive("/", buffer.getvalue()):
            raise SandboxError(f"could not write {target} in sandbox {self.id}")

    async def get_file(self, path: str) -> bytes:
        return await asyncio.to_thread(self._get_blocking, path)

    def _get_blocking(self, path: str, container: Any = None) -> bytes:
        import docker.errors

        container = container or self._ensure_shell_container()
        target = _in_sandbox_path(path, container.attrs.get("Config", {}).get("WorkingDir", "/"))
        try:
            chunks, _stat = container.get_archive(target)
            raw = b"".join(chunks)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"{target} does not exist in sandbox {self.id}") from None
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            member = tar.next()
            if member is None:
                raise FileNotFoundError(target)
            if member.isdir():
                raise IsADirectoryError(f"{target} is a folder in sandbox {self.id}")
            while member is not None and member.issym():  # a symlink: the engine sends the link
                target = _in_sandbox_path(member.linkname, posixpath.dirname(target))
                return self._get_blocking(target, container)
            handle = tar.extractfile(member)
            if handle is None:
                raise FileNotFoundError(f"{target} is not a regular file in sandbox {self.id}")
            return handle.read()

    async def expose(self, port: int) -> str:
        urls = await asyncio.to_thread(self._published_urls)
        if port in urls:
            return urls[port]
        where = "SandboxSpec.ports" if self.mode == "container" else (
            "SandboxSpec.ports (the host) or ContainerSpec.publish"
        )
        raise SandboxUnsupported(
            f"port {port} of docker sandbox {self.id} is not published: Docker publishes ports "
            f"only when a container starts, so list it in {where}"
        )

    def _published_urls(self) -> dict[int, str]:
        if self.mode == "vm" and self.ports:
            self._ensure_shell_container()
        urls: dict[int, str] = {}
        for container in self._containers():
            for port, url in _published(container.attrs).items():
                if container.name == self.shell_container or port not in urls:
                    urls[port] = url
        return urls

    def _containers(self) -> list[Any]:
        return self.client.containers.list(
            all=True, filters={"label": f"{SANDBOX_LABEL}={self.id}"}
        )

    async def terminate(self) -> None:
        await settle(self._terminate_blocking)

    def _terminate_blocking(self) -> None:
        """Remove the containers side by side, then the networks side by side.

        Serial removal was a third of a warm ``agent-env run echo-mcp`` (each force-remove waits
        for its container to die and its endpoints to detach)."""
        api = self.client.api
        with self._dns_lock:  # a DNS answerer being started is listed below, not left behind
            self._dns = ""
        containers = api.containers(all=True, quiet=True,
                                    filters={"label": f"{SANDBOX_LABEL}={self.id}"})
        failed = [exc for exc in _side_by_side([
            (lambda cid=c["Id"]: api.remove_container(cid, force=True, v=True))
            for c in containers]) if exc is not None and not _gone(exc)
            and "already in progress" not in str(exc)]
        if failed:
            raise failed[0]
        volumes = (api.volumes(filters={"label": f"{SANDBOX_LABEL}={self.id}"})
                   or {}).get("Volumes") or []
        failed = [exc for exc in _side_by_side([
            (lambda name=v["Name"]: api.remove_volume(name, force=True)) for v in volumes])
            if exc is not None and not _gone(exc)]
        if failed:
            raise failed[0]
        left: list[BaseException] = []
        for _attempt in range(3):
            networks = api.networks(filters={"label": f"{SANDBOX_LABEL}={self.id}"})
            left = [exc for exc in _side_by_side([
                (lambda nid=n["Id"]: api.remove_network(nid)) for n in networks])
                if exc is not None and not _gone(exc)]
            if not left:
                return
            time.sleep(0.2)  # an endpoint still detaching from a removed container
        raise SandboxError(f"could not remove the networks of sandbox {self.id}: {left[0]}")

    # -- VM-like sandboxes -----------------------------------------------------------------

    async def build_image(
        self, context: str, tag: str, *, labels: dict[str, str],
        progress: Callable[[str], None] | None = None,
    ) -> str:
        """Build ``context``; ``tag`` with a ``:`` is used as is, else it names the repository
        slug and the tag is the content hash. Returns the image ref actually used.

        Ours beyond the contract: ``progress`` gets every build output line, and one line
        ``image <ref> (cached)`` when the sources are unchanged and nothing is built."""
        from agentenv_docker_env.build import build_image

        if self.mode != "vm":
            return await super().build_image(context, tag, labels=labels)
        self.warm_dns()
        explicit = tag if ":" in tag.rsplit("/", 1)[-1] else None
        name = None if explicit else tag
        stop = threading.Event()
        task = asyncio.ensure_future(asyncio.to_thread(
            build_image, context, name=name, tag=explicit, labels=labels, client=self.client,
            progress=progress, stop=stop,
        ))
        try:
            built = await asyncio.shield(task)
        except asyncio.CancelledError:
            stop.set()  # a cold build takes minutes: do not make Ctrl-C wait for it
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: the stop is the expected outcome
            raise
        return built.tag

    async def run_container(self, spec: ContainerSpec) -> dict[int, str]:
        if self.mode != "vm":
            return await super().run_container(spec)
        (urls,) = await settle(lambda: self._run_blocking(spec))
        return urls

    def _run_blocking(self, spec: ContainerSpec) -> dict[int, str]:
        import docker.errors

        name = self.container_name(spec.name)
        image = spec.image
        committed = self._committed.get(spec.name)
        if committed is not None and committed.source_image == spec.image:
            image = committed.ref

        def start() -> dict[int, str]:
            return self._create_started(
                name, image, role="container",
                command=list(spec.command) if spec.command else None,
                env=dict(spec.env), publish=tuple(spec.publish), alias=spec.name,
                extra_labels={**spec.labels, NAME_LABEL: spec.name},
                private=spec.private, edge=spec.edge, egress=spec.egress,
                sealed=spec.sealed, memory_mb=spec.memory_mb,
                healthcheck=spec.healthcheck, volumes=spec.volumes, outbound=spec.outbound,
                sealed_peer=spec.sealed_peer,
            )

        if spec.sealed or spec.sealed_peer:
            reason = self.agent_isolation()
            if reason is not None:
                raise SandboxUnsupported(f"container '{spec.name}' cannot be sealed: {reason}")
            sealing = self._seal_blocking()
        else:
            sealing = None
        if name in self._names:  # a rerun of the same deploy step replaces its container
            self._remove_quietly(name)
        try:
            try:
                urls = start()
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: the name is taken (by a run before an attach)
                    raise
                self._remove_quietly(name)
                urls = start()
        except BaseException:
            if sealing is not None:  # nothing of it goes on after the step hears the failure
                concurrent.futures.wait([sealing])
            raise
        if sealing is not None:  # its peers are on its network before it is called started
            sealing.result()
        self._specs[spec.name] = spec
        if image != spec.image:
            self._started_committed.add(image)
        return urls

    def _dns_address(self) -> str | None:
        """The address of the sandbox's DNS answerer on its private network, started on first
        use (a small container of the host image): the offline containers' resolver asks it
        for outside names and hears "no such name" in a millisecond, where Docker's own would
        wait 10-20 s for an upstream it cannot reach. None when it cannot run (the one-second
        resolver options still hold)."""
        with self._dns_lock:
            if self._dns is None:
                self._dns = self._start_dns() or ""
            return self._dns or None

    def warm_dns(self) -> None:
        """Start the DNS answerer in the background (a deploy's builds hide its start), once."""
        if self.mode == "vm" and self.has_edge and self._dns is None \
                and not self._dns_warming:
            self._dns_warming = True
            threading.Thread(target=self._dns_address, daemon=True).start()

    def _start_dns(self) -> str | None:
        import docker.errors

        name = f"{self.id}-dns"
        try:
            try:  # a sandbox attached again finds the one it started
                found = self.client.api.inspect_container(name)
            except docker.errors.NotFound:
                self._create_started(name, self.host_image, role="dns",
                                     command=["python", "-c", NXDOMAIN_SERVER], memory_mb=32,
                                     extra_labels={NAME_LABEL: "dns"})
                found = self.client.api.inspect_container(name)
        except docker.errors.DockerException:
            return None
        networks = (found.get("NetworkSettings") or {}).get("Networks") or {}
        return str((networks.get(self.network) or {}).get("IPAddress") or "") or None

    def _outbound_blocking(self) -> None:
        """Make the outbound network once: a plain bridge (a route out) only outbound private
        containers join, so nothing else of the sandbox reaches them through it."""
        with self._seal_lock:
            if self._outbound:
                return
            api = self.client.api
            name = self.outbound_network
            if not any(n.get("Name") == name for n in api.networks(names=[name])):
                api.create_network(name, driver="bridge", labels=self._labels("network"))
            self._outbound = True

    def _seal_blocking(self) -> concurrent.futures.Future[None]:
        """Make the sealed network (once) and connect every publishing container to it; the
        connecting goes on in the returned future.

        Why a future: connecting a running container took 0.3-0.4 s with the engine busy, and
        a sealed container needs only the network to be created and started; its
        ``run_container`` waits for the future before it returns."""
        with self._seal_lock:
            if self._sealing is not None:
                return self._sealing
            api = self.client.api
            name = self.sealed_network
            if not any(n.get("Name") == name for n in api.networks(names=[name])):
                api.create_network(name, driver="bridge", internal=True,
                                   options=NO_HOST_ADDRESS, labels=self._labels("network"))
            # every state: a publishing container created before the seal may not run yet
            joining = []
            for container in api.containers(all=True,
                                            filters={"label": f"{SANDBOX_LABEL}={self.id}"}):
                networks = (container.get("NetworkSettings") or {}).get("Networks") or {}
                labels = container.get("Labels") or {}
                published = PUBLISHES_LABEL in labels or any(
                    p.get("PublicPort") for p in container.get("Ports") or ())
                if published and name not in networks:
                    joining.append((str(container["Id"]), labels.get(NAME_LABEL)))
            sealing: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._sealing = sealing  # from here on, new publishing containers join at create
        threading.Thread(target=self._join_sealed, args=(joining, sealing), daemon=True).start()
        return sealing

    def _join_sealed(self, joining: list[tuple[str, str | None]],
                     sealing: concurrent.futures.Future[None]) -> None:
        """Connect ``joining`` (container id, alias) to the sealed network side by side."""
        import docker.errors

        def join(cid: str, alias: str | None) -> None:
            try:
                self.client.api.connect_container_to_network(
                    cid, self.sealed_network, aliases=[alias] if alias else None)
            except docker.errors.NotFound:
                pass  # removed meanwhile (a failed start): nothing to seal
            except docker.errors.APIError as exc:
                if "already exists" not in str(exc):
                    raise

        try:
            failed = [exc for exc in _side_by_side([
                (lambda cid=cid, alias=alias: join(cid, alias)) for cid, alias in joining])
                if exc is not None]
        except BaseException as exc:  # the pool itself: the waiter hears it rather than hangs
            failed = [exc]
        if failed:
            sealing.set_exception(failed[0])
        else:
            sealing.set_result(None)

    # -- committed containers --------------------------------------------------------------

    async def commit_containers(self, *, labels: dict[str, str]) -> tuple[CommittedImage, ...]:
        servers = [spec for spec in self._specs.values() if spec.private and not spec.edge]
        if self.mode == "vm" and not servers:  # attached again: what the engine says it runs
            servers = await asyncio.to_thread(self._private_containers)
        if self.mode != "vm" or not servers:
            raise SandboxUnsupported(f"docker sandbox {self.id} started no env servers to "
                                     "commit (only containers run_container started here are)")
        kept = [(spec.name, m.name) for spec in servers for m in spec.volumes]
        if kept:
            raise SandboxUnsupported(f"container '{kept[0][0]}' keeps its files in volume "
                                     f"'{kept[0][1]}', which a commit does not save")
        token = secrets.token_hex(6)
        return tuple(await settle(*(
            (lambda spec=spec: self._commit_blocking(spec, token, labels)) for spec in servers)))

    def _private_containers(self) -> list[ContainerSpec]:
        """The specs of this sandbox's private containers (those run_container started that
        publish nothing and have no edge), read back from the engine for a sandbox attached
        from its id."""
        api = self.client.api
        found = []
        for summary in api.containers(filters={"label": [f"{SANDBOX_LABEL}={self.id}",
                                                         f"{ROLE_LABEL}=container"]}):
            info = api.inspect_container(summary["Id"])
            networks = set((info.get("NetworkSettings") or {}).get("Networks") or {})
            if networks != {self.network} and networks != {self.network, self.outbound_network}:
                continue  # on the edge or sealed network: a gateway or an agent
            volumes = tuple(VolumeMount(str(m.get("Name")), str(m.get("Destination")))
                            for m in info.get("Mounts") or () if m.get("Type") == "volume")
            name = (info.get("Config", {}).get("Labels") or {}).get(NAME_LABEL)
            if name:
                found.append(ContainerSpec(name=name, image=str(info["Config"]["Image"]),
                                           volumes=volumes))
        return found

    def _commit_blocking(self, spec: ContainerSpec, token: str,
                         labels: dict[str, str]) -> CommittedImage:
        repository = f"{COMMIT_REPOSITORY}-{image_slug(spec.name)}"
        # pause=True (the default): the files are saved as of one instant, not mid-write
        self.client.api.commit(self.container_name(spec.name), repository=repository, tag=token,
                               conf={"Labels": dict(labels)})
        return CommittedImage(spec.name, spec.image, f"{repository}:{token}")

    def start_from_committed(self, images: Sequence[CommittedImage]) -> None:
        self._committed.update({image.container: image for image in images})

    def started_from_committed(self) -> frozenset[str]:
        return frozenset(self._started_committed)

    async def remove_committed(self, images: Sequence[CommittedImage]) -> None:
        await settle(*((lambda ref=image.ref: self._remove_image_blocking(ref))
                       for image in images))

    def _remove_image_blocking(self, ref: str) -> None:
        import docker.errors

        try:
            self.client.api.remove_image(ref, noprune=False)
        except docker.errors.NotFound:
            pass

    def _remove_quietly(self, name: str) -> None:
        import docker.errors

        try:
            self.client.api.remove_container(name, force=True)
        except docker.errors.NotFound:
            pass

    async def container_status(self, name: str) -> str | None:
        """``running``, ``exited with code 137``..., or ``gone``."""
        return await asyncio.to_thread(self._status_blocking, name)

    def _status_blocking(self, name: str) -> str | None:
        for candidate in (self.container_name(name), name):
            try:
                state = self.client.api.inspect_container(candidate).get("State") or {}
            except Exception as exc:
                if _gone(exc):
                    continue
                raise
            status = str(state.get("Status") or "unknown")
            if status == "exited":
                why = " (out of memory)" if state.get("OOMKilled") else ""
                return f"exited with code {state.get('ExitCode')}{why}"
            return status
        return "gone"

    async def container_health(self, name: str) -> str | None:
        """Docker's health status of a container started with a healthcheck."""
        return await asyncio.to_thread(self._health_blocking, name)

    def _health_blocking(self, name: str) -> str | None:
        try:
            state = self.client.api.inspect_container(self.container_name(name)).get("State")
        except Exception as exc:
            if _gone(exc):
                return None
            raise
        health = (state or {}).get("Health") or {}
        return str(health["Status"]) if health.get("Status") else None

    async def container_logs(self, name: str, *, tail: int = 50) -> str:
        return await asyncio.to_thread(self._logs_blocking, name, tail)

    async def put_container_file(self, name: str, path: str, data: bytes, *,
                                 mode: int = 0o644) -> None:
        await asyncio.to_thread(self._put_container_blocking, name, path, data, mode)

    async def container_exec(self, name: str, command: str | list[str], *,
                             cwd: str | None = None, env: dict[str, str] | None = None,
                             timeout: float | None = None,
                             user: str | None = None) -> ExecResult:
        argv = shell_argv(command) if isinstance(command, str) else list(command)
        state: dict[str, Any] = {}
        task = asyncio.to_thread(self._exec_blocking, argv, cwd, env, state,
                                 self.container_name(name), user)
        try:
            return await asyncio.wait_for(task, timeout) if timeout else await task
        except TimeoutError:
            self._kill_exec(state)
            return ExecResult(124, "", f"timed out after {timeout} s")

    async def get_container_file(self, name: str, path: str) -> bytes:
        import docker.errors

        if not path.startswith("/"):
            raise SandboxError(f"{path!r}: a container path is absolute")

        def read() -> bytes:
            try:
                container = self.client.containers.get(self.container_name(name))
            except docker.errors.NotFound:
                raise SandboxError(f"container {name} of sandbox {self.id} is gone") from None
            return self._get_blocking(path, container)

        return await asyncio.to_thread(read)

    def _put_container_blocking(self, name: str, path: str, data: bytes, mode: int) -> None:
        if not path.startswith("/") or ".." in path.split("/"):
            raise SandboxError(f"{path!r}: a container path is absolute, without '..'")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        try:
            done = self.client.api.put_archive(self.container_name(name), "/", buffer.getvalue())
        except Exception as exc:
            if _gone(exc):
                raise SandboxError(f"container {name} of sandbox {self.id} is gone") from None
            raise
        if not done:
            raise SandboxError(f"could not write {path} in container {name} of sandbox "
                               f"{self.id}")

    def _logs_blocking(self, name: str, tail: int) -> str:
        for candidate in (self.container_name(name), name):
            try:
                raw = self.client.api.logs(candidate, tail=tail, stdout=True, stderr=True)
            except Exception as exc:
                if _gone(exc):
                    continue
                raise
            return raw.decode("utf-8", "replace")
        return ""


class DockerSandboxProvider(SandboxProvider):
    """Sandboxes on the local Docker engine (``[sandbox.providers.docker.config]``)."""

    name: ClassVar[str] = "docker"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")

    def __init__(
        self,
        *,
        base_url: str | None = None,
        default_image: str = DEFAULT_IMAGE,
        internal_network: bool = True,
        default_memory_mb: int = DEFAULT_MEMORY_MB,
    ) -> None:
        if isinstance(default_memory_mb, bool) or not isinstance(default_memory_mb, int) \
                or not 6 <= default_memory_mb <= 1024 * 1024:
            raise ConfigError("[sandbox.providers.docker.config] default_memory_mb must be a "
                              f"whole number of MiB from 6 to 1048576, not {default_memory_mb!r}")
        self.base_url = base_url
        self.default_image = default_image
        self.internal_network = internal_network
        self.default_memory_mb = default_memory_mb

    @classmethod
    def availability(cls) -> str | None:
        return daemon_problem()

    @property
    def client(self) -> Any:
        return docker_client(self.base_url)

    async def create(self, spec: SandboxSpec) -> DockerSandbox:
        self.check_spec(spec)
        (client,) = await settle(lambda: self.client)
        sandbox = self._new_sandbox(client, spec)
        try:
            if spec.mode == "vm" and sandbox.has_edge:
                await settle(
                    lambda: self._create_network(sandbox, sandbox.network, internal=True),
                    lambda: self._create_network(sandbox, sandbox.edge_network, internal=False),
                )
            elif spec.mode == "vm":
                await settle(
                    lambda: self._create_network(sandbox, sandbox.network, internal=False))
            else:
                await settle(lambda: self._start_main(sandbox, spec))
        except BaseException:
            await asyncio.shield(sandbox.terminate())  # leave nothing behind
            raise
        return sandbox

    @staticmethod
    def _create_network(sandbox: DockerSandbox, name: str, *, internal: bool) -> None:
        """Make one of the sandbox's networks. The private one of a sandbox with an edge
        takes a subnet of ``PRIVATE_SUBNETS`` whose ``.2`` is kept for the DNS answerer
        (automatic addresses come from its upper half), so offline containers start beside
        the answerer instead of after it (a third of a warm echo-mcp deploy)."""
        import docker.errors
        import docker.types

        api = sandbox.client.api
        options = NO_HOST_ADDRESS if internal else None
        labels = sandbox._labels("network")
        if internal and sandbox.has_edge and name == sandbox.network:
            first, count = PRIVATE_SUBNETS
            for _ in range(SUBNET_TRIES):
                base = first + (secrets.randbelow(count) << 8)
                prefix = ".".join(str(base >> shift & 255) for shift in (24, 16, 8))
                pool = docker.types.IPAMPool(subnet=f"{prefix}.0/24",
                                             iprange=f"{prefix}.128/25", gateway=f"{prefix}.1")
                try:
                    api.create_network(name, driver="bridge", internal=True, options=options,
                                       labels=labels,
                                       ipam=docker.types.IPAMConfig(pool_configs=[pool]))
                except docker.errors.APIError as exc:
                    why = str(exc).lower()  # "Pool overlaps ...", or "failed to allocate
                    if "overlap" not in why and "already in use" not in why:  # gateway (...):
                        raise  # Address already in use" (20.10, the same subnet elsewhere)
                    continue  # another network holds that subnet: try another
                sandbox.dns_planned = f"{prefix}.2"
                return
        api.create_network(name, driver="bridge", internal=internal, options=options,
                           labels=labels)

    @staticmethod
    def _start_main(sandbox: DockerSandbox, spec: SandboxSpec) -> None:
        limits: dict[str, Any] = {}
        if spec.cpu:
            limits["nano_cpus"] = int(spec.cpu * 1e9)
        sandbox._create_started(
            sandbox.shell_container, sandbox.host_image, role="main", entrypoint=KEEP_ALIVE,
            command=[], env=dict(spec.env_vars), publish=tuple(spec.ports), host_options=limits,
        )

    def _new_sandbox(self, client: Any, spec: SandboxSpec) -> DockerSandbox:
        """The sandbox object and its labels (owner and expiry included); nothing created yet."""
        sandbox_id = f"ae-{image_slug(spec.name)[:32]}-{secrets.token_hex(4)}"
        image = spec.image or self.default_image
        labels = {
            RUN_LABEL: sandbox_id,
            **spec.labels,
            SANDBOX_LABEL: sandbox_id,
            PROVIDER_LABEL: self.name,
            MODE_LABEL: spec.mode,
            HOST_IMAGE_LABEL: image,
            PORTS_LABEL: ",".join(str(p) for p in spec.ports),
            MEMORY_LABEL: str(spec.memory_mb or self.default_memory_mb),
            **ownership_labels(spec.ttl_seconds),
        }
        if spec.mode == "vm" and self.internal_network:
            labels[EDGE_LABEL] = "1"
        return DockerSandbox(
            client, sandbox_id, spec.mode, labels=labels, host_image=image,
            ports=tuple(spec.ports), env_vars=dict(spec.env_vars),
        )

    async def prune_build_leftovers(self, *, older_than: float, dry_run: bool) -> list[str]:
        """Untagged images with the builder label that no container uses, older than
        ``older_than``: a killed build's step images (an image in use is refused by the engine
        and kept, as is a running build's, whose next step's container uses it)."""
        return list(await asyncio.to_thread(self._prune_blocking, older_than, dry_run))

    def _prune_blocking(self, older_than: float, dry_run: bool) -> list[str]:
        import docker.errors

        api = docker_client(self.base_url).api
        now = time.time()
        done = []
        label = f"{BUILDER_LABEL}={BUILDER}"
        for image in api.images(filters={"dangling": True, "label": label}):
            age = now - float(image.get("Created") or now)
            if age < older_than:
                continue
            line = (f"image {image['Id'][7:19]} (a build's step, untagged, "
                    f"{age / 3600:.1f} h old, {int(image.get('Size') or 0) / 1e6:.0f} MB)")
            if not dry_run:
                try:
                    api.remove_image(image["Id"])
                except docker.errors.APIError as exc:
                    if exc.status_code in (404, 409):
                        continue  # gone already, or a container (a build's step) uses it
                    raise
            done.append(line)
        return done

    async def find_images(self, labels: dict[str, str]) -> list[str] | None:
        """Tags of the engine's images carrying every one of ``labels``."""
        def find() -> list[str]:
            wanted = [f"{k}={v}" for k, v in labels.items()]
            images = docker_client(self.base_url).api.images(filters={"label": wanted})
            return sorted(t for image in images for t in image.get("RepoTags") or ()
                          if t != "<none>:<none>")

        return await asyncio.to_thread(find)

    async def remove_committed(self, images: Sequence[CommittedImage]) -> None:
        """Remove a snapshot's images from the engine."""
        import docker.errors

        def remove(ref: str) -> None:
            try:
                self.client.api.remove_image(ref, noprune=False)
            except docker.errors.NotFound:
                pass

        await settle(*((lambda ref=image.ref: remove(ref)) for image in images))

    async def remove_volume(self, name: str) -> bool:
        """Remove a durable volume (one this provider made: it carries the durable label)."""
        return await asyncio.to_thread(self._remove_volume_blocking, name)

    def _remove_volume_blocking(self, name: str) -> bool:
        import docker.errors

        api = self.client.api
        try:
            found = api.inspect_volume(name)
        except docker.errors.NotFound:
            return False
        if (found.get("Labels") or {}).get(DURABLE_LABEL) != "1":
            raise SandboxError(f"volume {name} is not a durable volume agent-env made; left "
                               "as it is")
        api.remove_volume(name, force=True)
        return True

    async def attach(self, sandbox_id: str) -> DockerSandbox | None:
        found = await asyncio.to_thread(self._find_blocking, {SANDBOX_LABEL: sandbox_id})
        return found[0] if found else None

    async def list_sandboxes(self, labels: dict[str, str]) -> list[Sandbox]:
        return list(await asyncio.to_thread(self._find_blocking, labels))

    def _find_blocking(self, labels: dict[str, str]) -> list[DockerSandbox]:
        filters = {"label": [SANDBOX_LABEL, f"{PROVIDER_LABEL}={self.name}"]
                   + [f"{key}={value}" for key, value in labels.items()]}
        client = self.client
        seen: dict[str, dict[str, str]] = {}
        # One list call each (labels included); the SDK's high-level lists inspect every item
        # afterwards, which fails when another process removes one in between.
        for network in client.api.networks(filters=filters):
            found = network.get("Labels") or {}
            seen.setdefault(found[SANDBOX_LABEL], found)
        for container in client.api.containers(all=True, filters=filters):
            found = container.get("Labels") or {}
            seen.setdefault(found[SANDBOX_LABEL], found)
        return [self._rebuild(client, sandbox_id, found) for sandbox_id, found in seen.items()]

    def _rebuild(self, client: Any, sandbox_id: str, found: dict[str, str]) -> DockerSandbox:
        own = {k: v for k, v in found.items() if k not in (ROLE_LABEL, NAME_LABEL)}
        ports = tuple(int(p) for p in found.get(PORTS_LABEL, "").split(",") if p)
        return DockerSandbox(
            client, sandbox_id, found.get(MODE_LABEL, "container"), labels=own,
            host_image=found.get(HOST_IMAGE_LABEL, self.default_image), ports=ports,
        )

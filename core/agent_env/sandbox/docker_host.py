"""Containers in a VM-like sandbox that runs its own Docker daemon, driven through ``exec``.

Why in the core: a cloud sandbox or microVM is reached only through the contract's ``exec``,
``put_file`` and ``expose``, so ``build_image``/``run_container``/``container_logs`` become
``docker`` commands run inside it. Several providers (tensorlake, tenki, smol_vm) need exactly
this, and plugins may not import each other, so they all subclass :class:`DockerHostSandbox`.

* builds are hermetic exactly as docker_env's, planned by the core's :mod:`agent_env.images`:
  the context copy carries this repository's protocol wheel and the tag is the content hash
  (``agentenv/<slug>:<digest16>``), so a second build of the same sources is one
  ``docker image inspect``;
* each sandbox has the contract's two networks, where containers reach each other by their
  ``ContainerSpec.name``: the private one (``<prefix>-net``: ``--internal``, and no bridge
  address in the VM, so neither the VM's processes nor the edge's containers reach an env
  server except through its gateway) and the edge one (``<prefix>-edge``: publishing, egress).
  A sealed container (an agent) gets a third, ``<prefix>-sealed``, made on first use, internal
  and without a bridge address as well, that every publishing container joins, and so does a
  ``sealed_peer`` (an egress proxy): its only peers are the gateways and such proxies.
  Container names carry the sandbox's prefix, and every container and network carries
  ``agentenv.sandbox=<id>`` so a teardown can find them;
* a published port is bound to a port the sandbox's daemon picks, which the provider then
  exposes as a URL (``expose``).
"""

from __future__ import annotations

import abc
import hashlib
import posixpath
import re
import secrets
import shlex
import tempfile
from typing import Any

from agent_env.images.plan import BUILD_DIGEST_LABEL, plan_build, split_tag, write_build_tar
from agent_env.sandbox.base import (
    ContainerSpec,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxUnsupported,
    shell_argv,
)

SANDBOX_LABEL = "agentenv.sandbox"
BUILD_TIMEOUT = 1800.0
#: Seconds a started ``dockerd`` may take to answer.
DOCKERD_WAIT = 60
LOG_TAIL = 40


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "x"


def hermetic_context(
    context: str, tag: str, labels: dict[str, str]
) -> tuple[str, bytes, dict[str, str]]:
    """(image ref, context tar, labels) for ``context``, as every provider builds it.

    ``tag`` is the contract's: with a ``:`` it is used as is, else it is the repository slug
    completed with the content hash. Only the build itself runs elsewhere (the sandbox's daemon).
    """
    name, explicit = split_tag(tag)
    plan = plan_build(context, name=name, tag=explicit)
    with tempfile.TemporaryFile() as handle:
        write_build_tar(plan, handle)
        handle.seek(0)
        data = handle.read()
    return plan.tag, data, {**labels, **plan.labels}


def _tail(text: str, lines: int = LOG_TAIL) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class DockerHostSandbox(Sandbox, abc.ABC):
    """A sandbox whose ``mode="vm"`` containers run on a Docker daemon inside it."""

    mode: str = "vm"
    #: Set once ``docker`` answered: later calls do not probe again.
    _docker_ready: bool = False

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "mode": self.mode}

    async def ensure_docker(self) -> None:
        """Make sure ``docker`` answers inside the sandbox: probed once, and when it does not
        answer, :meth:`start_docker` makes it (or says why it cannot)."""
        if self._docker_ready:
            return
        probe = await self.exec("docker info >/dev/null 2>&1")
        if probe.exit_code != 0:
            await self.start_docker()
        self._docker_ready = True

    @abc.abstractmethod
    async def start_docker(self) -> None:
        """Install or start Docker in the sandbox after the first probe found none; raise
        :class:`~agent_env.sandbox.base.SandboxUnsupported` naming the setting that fixes it."""

    async def start_dockerd(self, fix: str, *, wait_seconds: int = DOCKERD_WAIT) -> None:
        """Start the image's own ``dockerd`` and wait until it answers; what a ``start_docker``
        does for images that ship Docker but leave it stopped (cloud sandboxes mostly do).

        Commands may run as a user with passwordless sudo rather than root: then the daemon
        is started with ``sudo`` and its socket opened to that user. No ``dockerd``, or one
        that does not answer within ``wait_seconds``, is
        :class:`~agent_env.sandbox.base.SandboxUnsupported` ending with ``fix``.
        """
        started = await self.exec(
            'S=""; [ "$(id -u)" = 0 ] || S="sudo -n"; '
            "command -v dockerd >/dev/null || exit 3; "
            "pgrep -x dockerd >/dev/null || "
            "$S sh -c 'nohup setsid dockerd >/var/log/dockerd.log 2>&1 </dev/null &'; "
            f"for i in $(seq {wait_seconds * 2}); do "
            "if $S docker info >/dev/null 2>&1; then "
            '[ -z "$S" ] || $S chmod 666 /var/run/docker.sock; exit 0; fi; '
            "sleep 0.5; done; exit 4",
            timeout=wait_seconds + 30,
        )
        if started.exit_code != 0:
            why = ("has no dockerd" if started.exit_code == 3
                   else f"did not get dockerd answering within {wait_seconds}s")
            raise SandboxUnsupported(
                f"{self.provider_name} sandbox {self.id} {why}, so it cannot run env "
                f"containers; {fix}"
            )

    def host_ports(self) -> tuple[int, ...]:
        """The sandbox ports published container ports must bind to, in order of use. Empty
        (the default): the daemon picks any port, which :meth:`expose` then makes public. A
        provider that can make public only ports fixed when the sandbox was created (Vercel)
        lists those."""
        return ()

    @property
    def container_prefix(self) -> str:
        """What container and network names start with (unique per sandbox)."""
        return _slug(self.id)

    @property
    def network_name(self) -> str:
        """The private network (env servers and their gateway)."""
        return f"{self.container_prefix}-net"

    @property
    def edge_network_name(self) -> str:
        """The edge network (published ports, egress, agents)."""
        return f"{self.container_prefix}-edge"

    @property
    def outbound_network_name(self) -> str:
        """The outbound network (private containers that may reach outside)."""
        return f"{self.container_prefix}-out"

    @property
    def sealed_network_name(self) -> str:
        """The sealed network (sealed containers and the publishing ones they may reach)."""
        return f"{self.container_prefix}-sealed"

    def env_isolation(self) -> str | None:
        return None

    def agent_isolation(self) -> str | None:
        return None if self.mode == "vm" else (
            f"a container-mode {self.provider_name} sandbox runs no containers of its own")

    def container_name(self, name: str) -> str:
        return f"{self.container_prefix}-{_slug(name)}"

    async def docker(self, command: str, *, timeout: float | None = 300.0) -> ExecResult:
        """Run a ``docker ...`` shell command in the sandbox; raises if it fails."""
        result = await self.exec(command, timeout=timeout)
        if result.exit_code != 0:
            raise SandboxError(
                f"`{command.split(' <')[0][:120]}` failed in {self.provider_name} sandbox "
                f"{self.id} (exit {result.exit_code}): {_tail(result.stderr or result.stdout)}"
            )
        return result

    async def build_image(self, context: str, tag: str, *, labels: dict[str, str]) -> str:
        if self.mode != "vm":
            return await super().build_image(context, tag, labels=labels)
        import asyncio

        await self.ensure_docker()
        ref, tar, all_labels = await asyncio.to_thread(hermetic_context, context, tag, labels)
        want = all_labels.get(BUILD_DIGEST_LABEL, "")
        template = f'{{{{index .Config.Labels "{BUILD_DIGEST_LABEL}"}}}}'
        found = await self.exec(
            f"docker image inspect --format {shlex.quote(template)} {shlex.quote(ref)}"
        )
        if found.exit_code == 0 and want and found.stdout.strip() == want:
            return ref  # same sources, already built in this sandbox
        digest = hashlib.sha256(tar).hexdigest()[:16]
        remote = f"/tmp/agentenv-build-{digest}.tar"
        await self.put_file(remote, tar)
        label_args = " ".join(f"--label {shlex.quote(f'{k}={v}')}" for k, v in
                              sorted(all_labels.items()))
        built = await self.exec(
            f"docker build -q -t {shlex.quote(ref)} {label_args} - < {remote}; "
            f"code=$?; rm -f {remote}; exit $code",
            timeout=BUILD_TIMEOUT,
        )
        if built.exit_code != 0:
            raise SandboxError(
                f"building {ref} in {self.provider_name} sandbox {self.id} failed "
                f"(exit {built.exit_code}):\n{_tail(built.stderr + built.stdout)}"
            )
        return ref

    async def run_container(self, spec: ContainerSpec) -> dict[int, str]:
        if self.mode != "vm":
            return await super().run_container(spec)
        await self.ensure_docker()
        own = f"{SANDBOX_LABEL}={self.id}"
        await self.ensure_network()
        name = self.container_name(spec.name)
        published: set[str] = self.__dict__.setdefault("_published", set())
        if spec.sealed:
            await self.ensure_sealed_network(published)
            joins = [self.sealed_network_name]
        else:
            joins = [self.network_name] * spec.private + [self.edge_network_name] * spec.edge
            if spec.sealed_peer:
                await self.ensure_sealed_network(published)
            if (spec.publish and self.__dict__.get("_sealed_ready")) or spec.sealed_peer:
                joins.append(self.sealed_network_name)
            if spec.outbound:
                await self.docker(
                    f"docker network inspect {shlex.quote(self.outbound_network_name)} "
                    f">/dev/null 2>&1 || docker network create --label {shlex.quote(own)} "
                    f"{shlex.quote(self.outbound_network_name)} >/dev/null")
                joins.append(self.outbound_network_name)
        argv = ["docker", "create", "--name", name, "--network", joins[0],
                "--network-alias", spec.name, "--init", "--label", own]
        if spec.egress:
            argv += ["--add-host", "host.docker.internal:host-gateway"]
        for key, value in sorted(spec.labels.items()):
            argv += ["--label", f"{key}={value}"]
        for key, value in sorted(spec.env.items()):
            argv += ["-e", f"{key}={value}"]
        for port, host in zip(spec.publish, self._bind_ports(name, len(spec.publish)),
                              strict=True):
            argv += ["-p", f"0.0.0.0:{host or ''}:{port}"]
        if spec.private and not (spec.edge or spec.outbound):  # offline: fail lookups fast
            argv += ["--dns-opt", "timeout:1", "--dns-opt", "attempts:1"]
        check = spec.healthcheck
        if check is not None:
            argv += ["--health-cmd", check.shell_line, "--health-interval", f"{check.interval}s",
                     "--health-timeout", f"{check.timeout}s",
                     "--health-retries", str(check.retries),
                     "--health-start-period", f"{check.start_period}s"]
        volumes = ""
        if any(mount.durable for mount in spec.volumes):
            raise SandboxUnsupported(f"container '{spec.name}': the {self.provider_name} "
                                     "sandbox's Docker engine goes with the sandbox, so it keeps "
                                     "no durable volume (use the docker provider)")
        for mount in spec.volumes:
            volume = self.container_name(f"vol-{mount.name}")
            argv += ["-v", f"{volume}:{mount.path}" + (":ro" if mount.read_only else "")]
            volumes += (f"(docker volume inspect {shlex.quote(volume)} >/dev/null 2>&1 || "
                        f"docker volume create --label {shlex.quote(own)} "
                        f"{shlex.quote(volume)} >/dev/null) && ")
        argv.append(spec.image)
        argv += list(spec.command or ())
        connect = "".join(
            f" && docker network connect --alias {shlex.quote(spec.name)} "
            f"{shlex.quote(network)} {shlex.quote(name)}" for network in joins[1:])
        await self.docker(f"docker rm -f {shlex.quote(name)} >/dev/null 2>&1; " + volumes
                          + shlex.join(argv) + " >/dev/null" + connect
                          + f" && docker start {shlex.quote(name)} >/dev/null")
        if spec.publish:
            # Under the seal's lock: a seal made while this container was created either lists
            # it below (it runs by then) or came first, and then it joins the sealed network
            # here, as it would have at create.
            async with self._seal_lock():
                published.add(spec.name)
                if self.__dict__.get("_sealed_ready") and self.sealed_network_name not in joins:
                    await self.docker(
                        f"docker network connect --alias {shlex.quote(spec.name)} "
                        f"{shlex.quote(self.sealed_network_name)} {shlex.quote(name)}")
        urls: dict[int, str] = {}
        for port in spec.publish:
            mapped = await self.docker(f"docker port {shlex.quote(name)} {port}/tcp")
            host_port = _first_port(mapped.stdout)
            if host_port is None:
                raise SandboxError(f"container {spec.name} in {self.provider_name} sandbox "
                                   f"{self.id} published no host port for {port}")
            urls[port] = await self.expose(host_port)
        return urls

    def _bind_ports(self, container: str, count: int) -> list[int | None]:
        """Host ports for ``count`` published ports of ``container`` (None: the daemon picks):
        the free ones of :meth:`host_ports`, what a container being made again had first."""
        fixed = self.host_ports()
        if not fixed:
            return [None] * count
        bound: dict[int, str] = self.__dict__.setdefault("_bound_ports", {})
        for host in [h for h, owner in bound.items() if owner == container]:
            del bound[host]
        free = [host for host in fixed if host not in bound]
        if len(free) < count:
            raise SandboxUnsupported(
                f"the {self.provider_name} sandbox {self.id} has no public port left for "
                f"container {container} (its ports {', '.join(map(str, fixed))} are taken)")
        for host in free[:count]:
            bound[host] = container
        return list(free[:count])

    async def ensure_network(self) -> None:
        """Create the two networks once (Docker allows two networks of one name)."""
        import asyncio

        lock = self.__dict__.setdefault("_network_lock", asyncio.Lock())
        async with lock:
            if self.__dict__.get("_network_ready"):
                return
            network = shlex.quote(self.network_name)
            edge = shlex.quote(self.edge_network_name)
            own = shlex.quote(f"{SANDBOX_LABEL}={self.id}")
            await self.docker(
                f"(docker network inspect {network} >/dev/null 2>&1 || docker network create "
                f"--internal -o com.docker.network.bridge.inhibit_ipv4=true --label {own} "
                f"{network} >/dev/null) && (docker network inspect {edge} >/dev/null 2>&1 || "
                f"docker network create --label {own} {edge} >/dev/null)")
            self.__dict__["_network_ready"] = True

    def _seal_lock(self) -> Any:
        """The lock the seal and the publishing containers' joining take (one per sandbox)."""
        import asyncio

        return self.__dict__.setdefault("_seal_lock_", asyncio.Lock())

    async def ensure_sealed_network(self, published: set[str]) -> None:
        """Create the sealed network once and connect the publishing containers to it."""
        async with self._seal_lock():
            if self.__dict__.get("_sealed_ready"):
                return
            sealed = shlex.quote(self.sealed_network_name)
            own = shlex.quote(f"{SANDBOX_LABEL}={self.id}")
            connect = "".join(
                f" && docker network connect --alias {shlex.quote(name)} {sealed} "
                f"{shlex.quote(self.container_name(name))}" for name in sorted(published))
            await self.docker(
                f"(docker network inspect {sealed} >/dev/null 2>&1 || docker network create "
                f"--internal -o com.docker.network.bridge.inhibit_ipv4=true --label {own} "
                f"{sealed} >/dev/null){connect}")
            self.__dict__["_sealed_ready"] = True

    async def container_logs(self, name: str, *, tail: int = 50) -> str:
        result = await self.exec(
            f"docker logs --tail {int(tail)} {shlex.quote(self.container_name(name))} 2>&1"
        )
        return result.stdout if result.exit_code == 0 else ""

    async def container_status(self, name: str) -> str | None:
        """``running``, ``exited with code 3``..., or ``gone``."""
        found = await self.exec(
            "docker inspect -f '{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}' "
            f"{shlex.quote(self.container_name(name))}")
        if found.exit_code != 0:
            return "gone" if "No such" in found.stderr + found.stdout else None
        status, _, rest = found.stdout.strip().partition(" ")
        code, _, oom = rest.partition(" ")
        if status == "exited":
            return f"exited with code {code}" + (" (out of memory)" if oom == "true" else "")
        return status or None

    async def container_exec(self, name: str, command: str | list[str], *,
                             cwd: str | None = None, env: dict[str, str] | None = None,
                             timeout: float | None = None,
                             user: str | None = None) -> ExecResult:
        argv = ["docker", "exec"]
        if cwd:
            argv += ["-w", cwd]
        if user:
            argv += ["-u", user]
        for key, value in sorted((env or {}).items()):
            argv += ["-e", f"{key}={value}"]
        argv.append(self.container_name(name))
        argv += shell_argv(command) if isinstance(command, str) else list(command)
        try:
            return await self.exec(shlex.join(argv), timeout=timeout)
        except TimeoutError:  # a provider whose exec raises rather than answering 124
            return ExecResult(124, "", f"timed out after {timeout} s")

    async def get_container_file(self, name: str, path: str) -> bytes:
        """Through the host: ``docker cp`` to a temporary path there, then read."""
        if not path.startswith("/"):
            raise SandboxError(f"{path!r}: a container path is absolute")
        staged = f"/tmp/agentenv-get-{secrets.token_hex(6)}"
        copied = await self.exec(
            f"docker cp -L {shlex.quote(self.container_name(name))}:{shlex.quote(path)} "
            f"{staged}")
        if copied.exit_code != 0:
            text = (copied.stderr or copied.stdout).strip()
            if "Could not find" in text or "No such container:path" in text:
                raise FileNotFoundError(f"{path} does not exist in container {name}")
            raise SandboxError(f"could not read {path} in container {name}: {text[:300]}")
        try:
            return await self.get_file(staged)
        finally:
            await self.exec(f"rm -rf {staged}")

    async def put_container_file(self, name: str, path: str, data: bytes, *,
                                 mode: int = 0o644) -> None:
        """Through the host: the file goes to a temporary path there (with ``mode``, which
        ``docker cp`` keeps), then ``docker cp``."""
        if not path.startswith("/") or ".." in path.split("/"):
            raise SandboxError(f"{path!r}: a container path is absolute, without '..'")
        staged = f"/tmp/agentenv-put-{secrets.token_hex(6)}"
        await self.put_file(staged, data, mode=mode)
        container = shlex.quote(self.container_name(name))
        folder = shlex.quote(posixpath.dirname(path) or "/")
        result = await self.exec(
            f"docker exec {container} mkdir -p {folder} && "
            f"docker cp {shlex.quote(staged)} {container}:{shlex.quote(path)}; "
            f"status=$?; rm -f {shlex.quote(staged)}; exit $status")
        if result.exit_code != 0:
            raise SandboxError(f"could not write {path} in container {name}: "
                               f"{(result.stderr or result.stdout).strip()[:300]}")

    async def container_health(self, name: str) -> str | None:
        result = await self.exec(
            "docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "
            f"{shlex.quote(self.container_name(name))}")
        return (result.stdout.strip() or None) if result.exit_code == 0 else None

    async def remove_containers(self) -> None:
        """Remove this sandbox's containers, volumes and networks (for daemons that outlive
        it)."""
        own = shlex.quote(f"label={SANDBOX_LABEL}={self.id}")
        await self.exec(
            f"ids=$(docker ps -aq --filter {own}); [ -z \"$ids\" ] || docker rm -f $ids; "
            f"vols=$(docker volume ls -q --filter {own}); [ -z \"$vols\" ] || "
            "docker volume rm -f $vols >/dev/null; "
            f"docker network rm {shlex.quote(self.network_name)} "
            f"{shlex.quote(self.edge_network_name)} >/dev/null 2>&1; "
            f"docker network rm {shlex.quote(self.sealed_network_name)} "
            f"{shlex.quote(self.outbound_network_name)} >/dev/null 2>&1; true"
        )


def _first_port(text: str) -> int | None:
    """The host port of ``docker port`` output (``0.0.0.0:49153`` / ``[::]:49153``)."""
    for line in text.splitlines():
        match = re.search(r":(\d+)\s*$", line.strip())
        if match:
            return int(match.group(1))
    return None


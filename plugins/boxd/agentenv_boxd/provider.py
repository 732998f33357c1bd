"""The ``boxd`` sandbox provider: boxd machines through the ``boxd`` SDK.

A boxd machine is a VM booted from boxd's image (or a configured ``snapshot``) with Docker
inside, so this provider makes ``mode="vm"`` sandboxes only: env types build and run their
containers on that daemon (``agent_env.api.DockerHostSandbox``), and a published container port
is served on a ``p<port>`` proxy subdomain of the machine. A ``mode="container"`` request (an
image of its own) is refused by name.

Config, ``[sandbox.providers.boxd.config]``: the reference's keys (``api_key``, ``org``,
``base_url``, ``snapshot``), which the kernel checks the table against.

Machines are created ``isolated`` (no peers on the organization's network), carry the run's
labels (``agent-env gc`` finds leftovers by them) and a delete-after timer at their TTL. Any
SDK failure to answer during ``exec`` is exit code ``-1``, as the contract says.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import secrets
import shlex
from typing import Any, ClassVar

from agent_env.api import (
    ConfigError,
    DockerHostSandbox,
    ExecResult,
    LoopClient,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxUnsupported,
    create_without_leaks,
    delete_with_retries,
    missing_sdk,
    timed_argv,
    timed_result,
)

DEFAULT_BASE_URL = "https://boxd.sh:9443"
CONFIG_TABLE = "[sandbox.providers.boxd.config]"
MANAGED_LABEL = "agentenv.managed"
DEFAULT_TTL_SECONDS = 3 * 3600
#: boxd's machine sizes (vCPU, GiB memory), smallest first; a request gets the first that fits.
SIZES = ((1, 4), (2, 8), (4, 16), (8, 32))
DISK_GB = 100
READY_TIMEOUT = 180.0
CREATE_ATTEMPTS = 5
DELETE_ATTEMPTS = 5
GONE_STATES = frozenset({"destroyed", "destroying", "deleted", "failed", "error"})
#: Where spec env vars live in a machine (a restored snapshot takes none at create, and a
#: machine's own env is its main command's); every exec of ours reads it.
ENV_FILE = "/etc/agentenv-env.sh"
_RUN = f'[ -r {ENV_FILE} ] && . {ENV_FILE}; exec "$@" </dev/null'


def machine_size(spec: SandboxSpec) -> tuple[int, int]:
    """The smallest boxd size covering the spec's CPU and memory; a bigger request is refused
    before anything is created."""
    cpu, memory_gb = spec.cpu or 1, (spec.memory_mb or 0) / 1024
    if (spec.disk_mb or 0) / 1024 > DISK_GB:
        raise SandboxUnsupported(f"the 'boxd' sandbox provider gives every machine a "
                                 f"{DISK_GB} GB disk; {spec.disk_mb} MB was asked for")
    for vcpu, memory in SIZES:
        if vcpu >= cpu and memory >= memory_gb:
            return vcpu, memory
    raise SandboxUnsupported(f"the 'boxd' sandbox provider's largest machine is {SIZES[-1][0]} "
                             f"vCPU and {SIZES[-1][1]} GiB; {cpu:g} vCPU and "
                             f"{spec.memory_mb} MB were asked for")


class BoxdSandbox(DockerHostSandbox):
    """One boxd machine, addressed by id (and by name for its proxies)."""

    provider_name = "boxd"
    mode = "vm"

    def __init__(self, provider: BoxdSandboxProvider, machine: Any) -> None:
        self.provider = provider
        self.id = str(machine.id)
        self.name = str(machine.name)
        self.labels = dict(machine.labels or {})

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "name": self.name}

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        from boxd import BoxdError

        try:
            client = await self.provider.clients.get()
            done = await client.machines.exec(
                self.id, ["sh", "-c", _RUN, "agentenv", *timed_argv(command, timeout)], env=env,
                cwd=cwd, timeout=timeout + 30 if timeout else None, encoding="buffer")
        except (BoxdError, TimeoutError) as exc:
            return ExecResult(-1, "", f"lost boxd machine {self.id}: {type(exc).__name__}: "
                                      f"{exc}")
        return timed_result(int(done.exit_code), bytes(done.stdout).decode("utf-8", "replace"),
                            bytes(done.stderr).decode("utf-8", "replace"), timeout)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        from boxd import BoxdError

        parent = posixpath.dirname(path) or "."
        made = await self.exec(["mkdir", "-p", parent])
        if made.exit_code != 0:
            raise SandboxError(f"cannot create {parent} in boxd machine {self.id}: "
                               f"{made.stderr.strip()}")
        try:
            client = await self.provider.clients.get()
            await client.machines.files.upload(self.id, path, data)
        except BoxdError as exc:
            raise SandboxError(f"cannot write {path} in boxd machine {self.id}: {exc}") \
                from None
        if mode != 0o644:
            changed = await self.exec(["chmod", f"{mode:o}", path])
            if changed.exit_code != 0:
                raise SandboxError(f"cannot chmod {path} in boxd machine {self.id}: "
                                   f"{changed.stderr.strip()}")

    async def get_file(self, path: str) -> bytes:
        from boxd import BoxdError, NotFoundError

        try:
            client = await self.provider.clients.get()
            return bytes(await client.machines.files.download(self.id, path))
        except NotFoundError:
            raise FileNotFoundError(f"{path} does not exist in boxd machine {self.id}") \
                from None
        except BoxdError as exc:
            raise SandboxError(f"cannot read {path} in boxd machine {self.id}: {exc}") from None

    async def expose(self, port: int) -> str:
        """A ``p<port>`` proxy subdomain of the machine (boxd serves it without platform
        authentication; the gateway's own token guards what it serves)."""
        from boxd import BoxdError, ConflictError

        client = await self.provider.clients.get()
        name = f"p{port}"
        try:
            with contextlib.suppress(ConflictError):  # made already: it is listed below
                await client.machines.proxies.create(self.name, name, port)
            proxies = await client.machines.proxies.list(self.name)
        except BoxdError as exc:
            raise SandboxError(f"cannot expose port {port} of boxd machine {self.id}: "
                               f"{exc}") from None
        domain = next((p.domain for p in proxies if p.name == name), None)
        if not domain:
            raise SandboxError(f"boxd made no proxy for port {port} of machine {self.id}")
        return f"{self.provider.proxy_scheme}://{domain}"

    async def terminate(self) -> None:
        await self.provider.delete(self.id)

    async def start_docker(self) -> None:
        """Start the machine's ``dockerd`` when it is not running (boxd's image starts it)."""
        await self.start_dockerd(f"set snapshot in {CONFIG_TABLE} to a snapshot with Docker, or "
                                 "leave it unset (boxd's image has Docker)")


class BoxdSandboxProvider(SandboxProvider):
    """Machines on boxd (``[sandbox.providers.boxd.config]``)."""

    name: ClassVar[str] = "boxd"
    modes: ClassVar[tuple[str, ...]] = ("vm",)

    def __init__(
        self,
        *,
        api_key: str | None = None,
        org: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        snapshot: str | None = None,
    ) -> None:
        """``api_key`` is required (``env:NAME`` works); ``org`` is the organization machines
        are made in (default: the key's); ``base_url`` the API; ``snapshot`` a boxd snapshot
        every machine boots from instead of boxd's image.
        """
        if not api_key:  # absent, or an env: reference to an empty variable
            raise ConfigError(
                f"the boxd sandbox provider needs an API key: set api_key in {CONFIG_TABLE} of "
                ".agentenv/config.toml (for example api_key = \"env:BOXD_API_KEY\")"
            )
        self.api_key = api_key
        self.org = org
        self.base_url = base_url or DEFAULT_BASE_URL
        self.snapshot = snapshot
        #: Proxy URLs are https, unless the API itself is plain http (a local boxd).
        self.proxy_scheme = "http" if self.base_url.startswith("http://") else "https"
        self.clients: LoopClient[Any] = LoopClient(self._make_client, lambda c: c.close())

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; a missing key is a config error, said on construction."""
        return missing_sdk("boxd", "boxd")

    def _make_client(self) -> Any:
        from boxd import AsyncBoxd

        return AsyncBoxd(api_key=self.api_key, base_url=self.base_url)

    async def create(self, spec: SandboxSpec) -> BoxdSandbox:
        self.check_spec(spec)
        vcpu, memory = machine_size(spec)
        name = f"agentenv-{secrets.token_hex(6)}"
        arguments: dict[str, Any] = {
            "name": name, "isolated": True,
            "labels": {**spec.labels, MANAGED_LABEL: "true"}, "vcpu": vcpu,
            "memory": f"{memory}G", "auto_suspend_timeout": 0,
            "delete_after": spec.ttl_seconds or DEFAULT_TTL_SECONDS,
            "from_snapshot": self.snapshot, "org": self.org,
        }
        machine = await self._create({k: v for k, v in arguments.items() if v is not None})
        sandbox = BoxdSandbox(self, machine)
        try:
            client = await self.clients.get()
            await client.machines.wait_until_ready(sandbox.id, timeout=READY_TIMEOUT)
            if spec.env_vars:
                await self._write_env(sandbox, spec.env_vars)
        except BaseException as exc:
            await asyncio.shield(self._delete_quietly(sandbox.id))
            if isinstance(exc, Exception):
                raise SandboxError(f"boxd machine {name} did not get ready: {exc}") from None
            raise
        return sandbox

    async def _write_env(self, sandbox: BoxdSandbox, env_vars: dict[str, str]) -> None:
        """Spec env vars: exported by a profile file every exec of ours reads."""
        lines = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env_vars.items()))
        wrote = await sandbox.exec(['sh', '-c', 'S=""; [ "$(id -u)" = 0 ] || S="sudo -n"; '
                                    f'printf %s "$1" | $S tee {ENV_FILE} >/dev/null', 'sh',
                                    lines])
        if wrote.exit_code != 0:
            raise SandboxError(f"cannot write {ENV_FILE}: {wrote.stderr.strip()}")

    async def _create(self, arguments: dict[str, Any]) -> Any:
        """``machines.create``, leaving no machine behind (what a failed or cancelled create
        made is found by its unique name), its errors one line each."""
        from boxd import AuthenticationError, BoxdError, PermissionDeniedError, RateLimitError

        client = await self.clients.get()
        name = arguments["name"]

        async def reclaim(_: Any) -> None:
            await self._delete_quietly(name)

        try:
            return await create_without_leaks(
                lambda: client.machines.create(**arguments), reclaim,
                retry_on=(RateLimitError,), attempts=CREATE_ATTEMPTS,
                made_nothing=(AuthenticationError, PermissionDeniedError))
        except RateLimitError as exc:
            raise SandboxError(f"boxd kept refusing machine {name} for rate or quota "
                               f"({CREATE_ATTEMPTS} attempts): {exc}") from None
        except (AuthenticationError, PermissionDeniedError) as exc:
            raise SandboxError(f"boxd refused the API key: check api_key and org in "
                               f"{CONFIG_TABLE} ({exc})") from None
        except BoxdError as exc:
            raise SandboxError(f"boxd could not create machine {name}: {exc}") from None

    async def _delete_quietly(self, machine: str) -> None:
        with contextlib.suppress(SandboxError):
            await self.delete(machine)

    async def delete(self, machine: str) -> None:
        """Delete a machine by id or name; one already gone is fine, a failing API is retried,
        then reported (``agent-env gc`` finds what is left by label)."""
        from boxd import BoxdError, NotFoundError

        client = await self.clients.get()
        error = await delete_with_retries(lambda: client.machines.delete(machine),
                                          retry_on=(BoxdError,), gone=(NotFoundError,),
                                          attempts=DELETE_ATTEMPTS)
        if error is not None:
            raise SandboxError(f"cannot delete boxd machine {machine} after {DELETE_ATTEMPTS} "
                               f"attempts: {error}")

    async def attach(self, sandbox_id: str) -> BoxdSandbox | None:
        from boxd import BoxdError, NotFoundError

        try:
            machine = await (await self.clients.get()).machines.get(sandbox_id)
        except NotFoundError:
            return None
        except BoxdError as exc:
            raise SandboxError(f"cannot look up boxd machine {sandbox_id}: {exc}") from None
        if str(machine.status).lower() in GONE_STATES:
            return None
        return BoxdSandbox(self, machine)

    async def list_sandboxes(self, labels: dict[str, str]) -> list[BoxdSandbox]:
        from boxd import BoxdError

        try:
            machines = await (await self.clients.get()).machines.list(
                org=self.org, labels=dict(labels) or None)
        except BoxdError as exc:
            raise SandboxError(f"cannot list boxd machines: {exc}") from None
        return [BoxdSandbox(self, m) for m in machines
                if str(m.status).lower() not in GONE_STATES
                and all((m.labels or {}).get(k) == v for k, v in labels.items())]

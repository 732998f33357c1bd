"""The ``sail_vm`` sandbox provider: Sail Sailboxes through the ``sail`` SDK.

A Sailbox is a VM booted from Sail's ``devbox`` image, which ships Docker and runs as root, so
this provider makes ``mode="vm"`` sandboxes only: env types build and run their containers on
its daemon (``agent_env.api.DockerHostSandbox``), and a published container port is exposed as
a Sail listener on demand. A ``mode="container"`` request is refused by name.

Config, ``[sandbox.providers.sail_vm.config]``: the reference's keys (``api_key``, ``app``,
``min_size``, ``auto_sleep``, ``auto_sleep_min_idle_seconds``, ``runtime_threads``,
``inject_model_key``), which the kernel checks the table against. The endpoints are the SDK's
own settings (``SAIL_API_URL``, ``SAILBOX_API_URL``, ``SAILBOX_INGRESS_URL``).

The SDK keeps one process-wide client that reads ``SAIL_API_KEY`` when it is built: the
provider sets that variable only for the build and then restores it, so no process a run
starts sees the key. Sailboxes have no labels: each carries its spec's labels in
``LABELS_FILE``, which ``list_sandboxes`` reads (``agent-env gc`` finds leftovers by them), and
a unique name a failed or cancelled create is found by. Any SDK failure to answer during
``exec`` is exit code ``-1``, as the contract says.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import secrets
import threading
from typing import Any, ClassVar

import structlog

from agent_env.api import (
    ConfigError,
    DockerHostSandbox,
    ExecResult,
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

log = structlog.get_logger("agentenv.sail_vm")

CONFIG_TABLE = "[sandbox.providers.sail_vm.config]"
DEFAULT_APP = "agent-env"
NAME_PREFIX = "agentenv-"
MANAGED_LABEL = "agentenv.managed"
#: Where a Sailbox keeps the labels it was made with (Sail has none of its own).
LABELS_FILE = "/etc/agentenv/labels.json"
#: (size, vCPU, (min, max) memory GiB, (min, max) disk GiB), smallest first: Sail's sizes.
SIZES: tuple[tuple[str, int, tuple[int, int], tuple[int, int]], ...] = (
    ("s", 1, (2, 64), (8, 128)),
    ("m", 4, (8, 128), (32, 512)),
    ("l", 8, (16, 256), (64, 1024)),
)
SIZE_NAMES = tuple(size[0] for size in SIZES)
#: The spec's env vars, exported by a file every exec of ours reads (a Sailbox takes none).
ENV_FILE = "/etc/agentenv/env.sh"
_RUN = (f'[ -r {ENV_FILE} ] && . {ENV_FILE}; if [ -n "$1" ]; then cd "$1" || exit 1; fi; '
        'shift; exec "$@"')
DEFAULT_TTL_SECONDS = 3 * 3600
CREATE_TIMEOUT = 600
CREATE_ATTEMPTS = 5
DELETE_ATTEMPTS = 5
GONE_STATES = frozenset({"terminated", "terminating", "failed", "create_failed", "deleted"})
#: HTTP statuses of a create that made nothing and will not succeed if tried again.
REFUSED = frozenset({400, 401, 403, 404, 409, 422})
_key_lock = threading.Lock()


def sailbox_shape(spec: SandboxSpec, min_size: str) -> tuple[str, int, int]:
    """The smallest Sail size at or above ``min_size`` covering the spec, with its memory and
    disk ceilings in GiB; a bigger request is refused before anything is created."""
    cpu = spec.cpu or 1
    memory_gib = math.ceil((spec.memory_mb or 2048) / 1024)
    disk_gib = math.ceil((spec.disk_mb or 8192) / 1024)
    for name, vcpu, (memory_min, memory_max), (disk_min, disk_max) in \
            SIZES[SIZE_NAMES.index(min_size):]:
        if cpu <= vcpu and memory_gib <= memory_max and disk_gib <= disk_max:
            return name, max(memory_gib, memory_min), max(disk_gib, disk_min)
    raise SandboxUnsupported(f"the 'sail_vm' sandbox provider's largest Sailbox is l (8 vCPU, "
                             f"256 GiB, 1024 GiB disk); {cpu:g} vCPU, {spec.memory_mb} MB and "
                             f"{spec.disk_mb} MB disk were asked for")


def _status(error: BaseException) -> int | None:
    return getattr(error, "status_code", None)


def _rate_limited(error: BaseException) -> bool:
    return _status(error) == 429


def _refused(error: BaseException) -> bool:
    import sail

    return isinstance(error, (sail.PermissionDeniedError, sail.InvalidArgumentError)) or \
        _status(error) in REFUSED


class SailSandbox(DockerHostSandbox):
    """One Sailbox, addressed by its id."""

    provider_name = "sail_vm"
    mode = "vm"

    def __init__(self, provider: SailSandboxProvider, box: Any,
                 labels: dict[str, str] | None = None) -> None:
        self.provider = provider
        self.box = box
        self.id = str(box.sailbox_id)
        self.name = str(box.name)
        self.labels = dict(labels or {})

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
        # Through a shell that reads the spec's env file and goes to ``cwd`` (Sail takes a
        # working folder only with a shell command of its own).
        argv = ["sh", "-c", _RUN, "agentenv", cwd or "", *timed_argv(command, timeout)]
        try:
            process = await self.box.exec.aio(
                argv, env=env or None,
                timeout=int(timeout) + 30 if timeout else None)
            done = await process.wait()
        except Exception as exc:  # the SDK's errors: the Sailbox or Sail stopped answering
            return ExecResult(-1, "", f"lost sail sandbox {self.id}: {type(exc).__name__}: "
                                      f"{exc}")
        return timed_result(int(done.exit_code), done.stdout or "", done.stderr or "",
                            timeout)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        try:
            await self.box.fs.write.aio(path, data, mode=mode)
        except Exception as exc:
            raise SandboxError(f"cannot write {path} in sail sandbox {self.id}: {exc}") \
                from None

    async def get_file(self, path: str) -> bytes:
        import sail

        try:
            return bytes(await self.box.fs.read.aio(path))
        except sail.FileNotFoundError:
            raise FileNotFoundError(f"{path} does not exist in sail sandbox {self.id}") \
                from None
        except sail.SailError as exc:
            if exc.rpc_status == "not_found":
                raise FileNotFoundError(f"{path} does not exist in sail sandbox "
                                        f"{self.id}") from None
            raise SandboxError(f"cannot read {path} in sail sandbox {self.id}: {exc}") \
                from None

    async def expose(self, port: int) -> str:
        """A Sail listener for ``port`` (made on demand; Sail routes it, behind its
        allowlist, and the gateway's own token guards what it serves)."""
        try:
            listener = await self.box.expose.aio(port)
        except Exception as exc:
            raise SandboxError(f"cannot expose port {port} of sail sandbox {self.id}: "
                               f"{exc}") from None
        url = getattr(listener.endpoint, "url", None)
        if not url:
            raise SandboxError(f"Sail gave port {port} of sandbox {self.id} no URL")
        return str(url)

    async def terminate(self) -> None:
        await self.provider.delete(self.id)

    async def start_docker(self) -> None:
        """Start the Sailbox's ``dockerd`` when it is not running (the devbox image has it)."""
        await self.start_dockerd("Sail's devbox image has Docker: check the Sailbox's image")


class SailSandboxProvider(SandboxProvider):
    """Sailboxes on Sail (``[sandbox.providers.sail_vm.config]``)."""

    name: ClassVar[str] = "sail_vm"
    modes: ClassVar[tuple[str, ...]] = ("vm",)
    network_policies: ClassVar[tuple[str, ...]] = ("no-internet",)

    def __init__(
        self,
        *,
        api_key: str | None = None,
        app: str = DEFAULT_APP,
        min_size: str = "s",
        auto_sleep: bool = False,
        auto_sleep_min_idle_seconds: int | None = None,
        runtime_threads: int | None = None,
        inject_model_key: bool = True,
    ) -> None:
        """``api_key`` is required (``env:NAME`` or ``secret:NAME``); ``app`` the Sail app
        Sailboxes belong to; ``min_size`` the smallest size picked (``s``, ``m``, ``l``);
        ``auto_sleep`` lets Sail sleep an idle Sailbox (``auto_sleep_min_idle_seconds``, 1 to
        3600, turns it on). ``runtime_threads`` and ``inject_model_key`` are the reference's
        and accepted; they change nothing here.
        """
        if not api_key:  # absent, or an env: reference to an empty variable
            raise ConfigError(
                f"the sail_vm sandbox provider needs an API key: set api_key in {CONFIG_TABLE} "
                "of .agentenv/config.toml (for example api_key = \"env:SAIL_API_KEY\")")
        if min_size not in SIZE_NAMES:
            raise ConfigError(f"min_size in {CONFIG_TABLE} must be one of "
                              f"{', '.join(SIZE_NAMES)}, not {min_size!r}")
        if auto_sleep_min_idle_seconds is not None and \
                not 1 <= auto_sleep_min_idle_seconds <= 3600:
            raise ConfigError(f"auto_sleep_min_idle_seconds in {CONFIG_TABLE} must be 1 to "
                              f"3600, not {auto_sleep_min_idle_seconds}")
        self.api_key = api_key
        self.app = app or DEFAULT_APP
        self.min_size = min_size
        self.auto_sleep = auto_sleep or auto_sleep_min_idle_seconds is not None
        self.auto_sleep_min_idle_seconds = auto_sleep_min_idle_seconds
        for key, value in (("runtime_threads", runtime_threads),
                           ("inject_model_key", None if inject_model_key else False)):
            if value is not None:
                log.warning("sail_vm.setting_unused", key=key,
                            why="AgentEnv keeps model keys in its model gateway")

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; a missing key is a config error, said on construction."""
        return missing_sdk("sail", "sail", "Sail")

    def _sdk(self) -> Any:
        """The SDK, its process-wide client built with this provider's key (set in the
        environment for the build only)."""
        import sail
        from sail._core_client import CoreClient

        with _key_lock:
            if CoreClient._instance is None or \
                    getattr(CoreClient, "_agentenv_key", None) != self.api_key:
                before = os.environ.get("SAIL_API_KEY")
                os.environ["SAIL_API_KEY"] = self.api_key
                try:
                    sail.reset_transports()
                    CoreClient.reset()
                    CoreClient.get()
                    CoreClient._agentenv_key = self.api_key  # type: ignore[attr-defined]
                finally:
                    if before is None:
                        os.environ.pop("SAIL_API_KEY", None)
                    else:
                        os.environ["SAIL_API_KEY"] = before
        return sail

    async def create(self, spec: SandboxSpec) -> SailSandbox:
        self.check_spec(spec)
        size, memory_gib, disk_gib = sailbox_shape(spec, self.min_size)
        sail = self._sdk()
        slug = re.sub(r"[^a-z0-9-]+", "-", spec.name.lower()).strip("-")[:40] or "box"
        name = f"{NAME_PREFIX}{slug}-{secrets.token_hex(4)}"
        labels = {**spec.labels, MANAGED_LABEL: "true"}
        arguments: dict[str, Any] = {
            "app": self.app, "image": sail.Image.devbox("amd64"), "name": name, "size": size,
            "memory_limit_gib": memory_gib, "disk_limit_gib": disk_gib,
            "max_lifetime_seconds": spec.ttl_seconds or DEFAULT_TTL_SECONDS,
            "ingress_ports": list(spec.ports), "timeout": CREATE_TIMEOUT,
            "auto_sleep": sail.AutoSleep(automatic=self.auto_sleep,
                                         min_seconds_before_sleep=self.auto_sleep_min_idle_seconds),
        }
        if spec.network_policy == "no-internet":
            # An empty egress allowlist: nothing goes out, listeners still come in (Sail's
            # no_network would close them too, and it refuses ingress ports with it).
            arguments["network_policy"] = sail.NetworkAllowlist([])
        box = await self._create(arguments)
        sandbox = SailSandbox(self, box, labels)
        try:
            if str(box.status).lower() in GONE_STATES:
                raise SandboxError(f"Sailbox {box.sailbox_id} did not start: "
                                   f"{getattr(box, 'error_message', None) or box.status}")
            await sandbox.put_file(LABELS_FILE, json.dumps(labels, sort_keys=True).encode())
            if spec.env_vars:
                await sandbox.put_file(ENV_FILE, "".join(
                    f"export {k}={_quote(v)}\n" for k, v in sorted(spec.env_vars.items())
                ).encode())
        except BaseException:
            await asyncio.shield(self._delete_quietly(sandbox.id))
            raise
        return sandbox

    async def _create(self, arguments: dict[str, Any]) -> Any:
        """``Sailbox.create``, leaving no Sailbox behind (what a failed or cancelled create
        made is found by its unique name), its errors one line each."""
        import sail

        name = arguments["name"]

        async def reclaim(_: Any) -> None:
            for box in await self._named(name):
                await self._delete_quietly(str(box.sailbox_id))

        try:
            return await create_without_leaks(
                lambda: sail.Sailbox.create.aio(**arguments), reclaim,
                retry_on=_rate_limited, attempts=CREATE_ATTEMPTS, made_nothing=_refused)
        except sail.SailError as exc:
            status = _status(exc)
            if status == 429:
                raise SandboxError(f"Sail kept refusing Sailbox {name} for rate or quota "
                                   f"({CREATE_ATTEMPTS} attempts): {exc}") from None
            if status in (401, 403) or isinstance(exc, sail.PermissionDeniedError):
                raise SandboxError(f"Sail refused the API key: check api_key in "
                                   f"{CONFIG_TABLE} ({exc})") from None
            raise SandboxError(f"Sail could not create Sailbox {name}: {exc}") from None

    async def _named(self, name: str) -> list[Any]:
        sail = self._sdk()
        with contextlib.suppress(sail.SailError):
            return [box for box in await sail.Sailbox.list.aio(app_id=self.app, search=name)
                    if box.name == name]
        return []

    async def _delete_quietly(self, sailbox_id: str) -> None:
        with contextlib.suppress(SandboxError):
            await self.delete(sailbox_id)

    async def delete(self, sailbox_id: str) -> None:
        """Terminate a Sailbox; one already gone is fine, a failing API is retried, then
        reported (``agent-env gc`` finds what is left by its labels file)."""
        sail = self._sdk()

        async def attempt() -> None:
            box = await sail.Sailbox.get.aio(sailbox_id)
            if str(box.status).lower() not in GONE_STATES:
                await box.terminate.aio()

        error = await delete_with_retries(
            attempt, retry_on=(sail.SailError,), attempts=DELETE_ATTEMPTS,
            gone=lambda e: isinstance(e, sail.NotFoundError) or _status(e) == 404)
        if error is not None:
            raise SandboxError(f"cannot terminate Sailbox {sailbox_id} after "
                               f"{DELETE_ATTEMPTS} attempts: {error}")

    async def attach(self, sandbox_id: str) -> SailSandbox | None:
        sail = self._sdk()
        try:
            box = await sail.Sailbox.get.aio(sandbox_id)
        except sail.SailError as exc:
            if isinstance(exc, sail.NotFoundError) or _status(exc) == 404:
                return None
            raise SandboxError(f"cannot look up Sailbox {sandbox_id}: {exc}") from None
        if str(box.status).lower() in GONE_STATES:
            return None
        sandbox = SailSandbox(self, box)
        sandbox.labels = await self._labels(sandbox)
        return sandbox

    async def _labels(self, sandbox: SailSandbox) -> dict[str, str]:
        try:
            return dict(json.loads(await sandbox.get_file(LABELS_FILE)))
        except (FileNotFoundError, SandboxError, ValueError):
            return {}

    async def list_sandboxes(self, labels: dict[str, str]) -> list[SailSandbox]:
        sail = self._sdk()
        try:
            boxes = await sail.Sailbox.list.aio(app_id=self.app, search=NAME_PREFIX)
        except sail.SailError as exc:
            raise SandboxError(f"cannot list Sailboxes: {exc}") from None
        found = []
        for box in boxes:
            if str(box.status).lower() in GONE_STATES or \
                    not str(box.name).startswith(NAME_PREFIX):
                continue
            sandbox = SailSandbox(self, box)
            sandbox.labels = await self._labels(sandbox)
            if sandbox.labels.get(MANAGED_LABEL) == "true" and \
                    all(sandbox.labels.get(k) == v for k, v in labels.items()):
                found.append(sandbox)
        return found


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"

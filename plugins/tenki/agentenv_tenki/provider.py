"""The ``tenki`` sandbox provider: Tenki Cloud microVMs through the ``tenki`` SDK.

A sandbox is one Tenki session, booted from ``snapshot_id`` or ``image`` (at most one; neither
means Tenki's default). ``mode="vm"`` sandboxes run env containers on a Docker daemon inside
(``agent_env.api.DockerHostSandbox``); Docker is installed on first use unless the session
already has it (a snapshot made with Docker in it), and a published container port becomes a
preview URL.

Config, ``[sandbox.providers.tenki.config]``: the keyword parameters of
:meth:`TenkiSandboxProvider.from_config`, which the kernel checks the table against.

The SDK is blocking: every call runs in a worker thread. Labels live in the session's
metadata, so ``list_sandboxes`` and ``attach`` need nothing but the API.
"""

from __future__ import annotations

import asyncio
import math
import posixpath
import re
import secrets
from typing import Any, ClassVar

from agent_env.api import (
    ConfigError,
    DockerHostSandbox,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxUnsupported,
    missing_sdk,
    ownership_labels,
)

CONFIG_TABLE = "[sandbox.providers.tenki.config]"
MODE_KEY = "agentenv.mode"
SANDBOX_KEY = "agentenv.sandbox"
TIMEOUT_EXIT_CODE = 124
MIN_DISK_GB = 5
#: Network policies Tenki enforces, and the create arguments each one means.
NETWORK_POLICIES: dict[str, dict[str, Any]] = {"no-internet": {"allow_outbound": False}}
#: Installs and starts Docker in a session that has none (Debian/Ubuntu or Alpine guests).
INSTALL_DOCKER = (
    "set -e; if ! command -v docker >/dev/null 2>&1; then "
    "if command -v apt-get >/dev/null; then "
    "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
    "apt-get install -y -qq docker.io >/dev/null; "
    "elif command -v apk >/dev/null; then apk add --no-cache docker >/dev/null; "
    "else curl -fsSL https://get.docker.com | sh; fi; fi; "
    "docker info >/dev/null 2>&1 || { (nohup dockerd >/var/log/dockerd.log 2>&1 &); "
    "for i in $(seq 120); do docker info >/dev/null 2>&1 && exit 0; sleep 0.5; done; exit 4; }"
)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:32] or "sandbox"


class TenkiSandbox(DockerHostSandbox):
    """One Tenki session; ``handle`` is the SDK's ``Sandbox``."""

    provider_name = "tenki"
    #: Run when ``docker`` does not answer in the session (a class attribute so it can change).
    install_docker_script: ClassVar[str] = INSTALL_DOCKER

    def __init__(self, handle: Any, mode: str) -> None:
        self.handle = handle
        self.id = str(handle.id)
        self.mode = mode

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        from tenki_sandbox.errors import SandboxError as TenkiError

        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        try:
            result = await asyncio.to_thread(self.handle.exec, *argv, cwd=cwd, env=env,
                                             timeout=timeout)
        except (TenkiError, RuntimeError, OSError) as exc:
            return ExecResult(-1, "", f"lost tenki sandbox {self.id}: {exc}")
        if result.timed_out:
            return ExecResult(TIMEOUT_EXIT_CODE, "", f"timed out after {timeout:g}s")
        return ExecResult(int(result.exit_code), _text(result.stdout), _text(result.stderr))

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        from tenki_sandbox.errors import SandboxError as TenkiError

        try:
            parent = posixpath.dirname(path)
            if parent:
                await asyncio.to_thread(self.handle.fs.mkdir, parent, recursive=True)
            await asyncio.to_thread(self.handle.fs.write_bytes, path, data)
        except TenkiError as exc:
            raise SandboxError(f"cannot write {path} in tenki sandbox {self.id}: {exc}") \
                from None
        changed = await self.exec(["chmod", f"{mode:o}", path])
        if changed.exit_code != 0:
            raise SandboxError(f"cannot chmod {path} in tenki sandbox {self.id}")

    async def get_file(self, path: str) -> bytes:
        from tenki_sandbox.errors import FileNotFoundError as TenkiMissing
        from tenki_sandbox.errors import SandboxError as TenkiError

        try:
            return bytes(await asyncio.to_thread(self.handle.fs.read_bytes, path))
        except TenkiMissing:
            raise FileNotFoundError(f"{path} does not exist in tenki sandbox {self.id}") \
                from None
        except TenkiError as exc:
            raise SandboxError(f"cannot read {path} in tenki sandbox {self.id}: {exc}") \
                from None

    async def expose(self, port: int) -> str:
        from tenki_sandbox.errors import SandboxError as TenkiError

        try:
            exposed = await asyncio.to_thread(self.handle.expose_port, port)
        except TenkiError as exc:
            raise SandboxError(f"cannot expose port {port} of tenki sandbox {self.id}: "
                               f"{exc}") from None
        if not exposed.url:
            raise SandboxError(f"tenki gave no URL for port {port} of sandbox {self.id}")
        return str(exposed.url).rstrip("/")

    async def terminate(self) -> None:
        from tenki_sandbox.errors import (
            InvalidStateError,
            SessionNotFoundError,
            SessionTerminatedError,
        )

        try:
            await asyncio.to_thread(self.handle.close)
        except (SessionNotFoundError, SessionTerminatedError, InvalidStateError):
            pass  # already gone

    async def start_docker(self) -> None:
        """Docker is installed and started in the session (a snapshot with it skips this)."""
        installed = await self.exec(self.install_docker_script, timeout=900)
        if installed.exit_code != 0:
            raise SandboxUnsupported(
                f"could not install Docker in tenki sandbox {self.id} "
                f"(exit {installed.exit_code}: {installed.stderr.strip()[-300:]}); set "
                f"snapshot_id in {CONFIG_TABLE} to a snapshot that has Docker"
            )


def _text(data: Any) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes | bytearray) else str(data)


class TenkiSandboxProvider(SandboxProvider):
    """Tenki Cloud microVMs (``[sandbox.providers.tenki.config]``)."""

    name: ClassVar[str] = "tenki"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        snapshot_id: str | None = None,
        image: str | None = None,
        workspace_id: str | None = None,
        rpc: Any = None,
    ) -> None:
        """``rpc`` replaces the SDK's gRPC transport (tests give it a fake service)."""
        if not api_key:  # absent, or an env: reference to an empty variable
            raise ConfigError(
                f"the tenki sandbox provider needs an API key: set api_key in {CONFIG_TABLE} "
                "of .agentenv/config.toml (for example api_key = \"env:TENKI_API_KEY\")"
            )
        if snapshot_id and image:
            raise ConfigError(
                f"{CONFIG_TABLE} sets both snapshot_id and image; a Tenki sandbox boots from "
                "one of them, so keep at most one"
            )
        self.api_key = api_key
        self.base_url = base_url
        self.snapshot_id = snapshot_id
        self.image = image
        self.workspace_id = workspace_id
        self.rpc = rpc
        self._client: Any = None

    @classmethod
    def from_config(
        cls,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        snapshot_id: str | None = None,
        image: str | None = None,
        workspace_id: str | None = None,
    ) -> TenkiSandboxProvider:
        """The table's settings; the kernel refuses any other key, naming these.

        ``api_key`` is required (``env:NAME`` works) but has a default here so that a missing
        one gets the provider's message with an example, like an empty one; ``base_url``
        another API root; ``snapshot_id`` or ``image`` (at most one) what sessions boot from;
        ``workspace_id`` where they are billed.
        """
        return cls(api_key=api_key, base_url=base_url, snapshot_id=snapshot_id, image=image,
                   workspace_id=workspace_id)

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; a missing key is a config error, said by from_config."""
        return missing_sdk("tenki", "tenki")

    @property
    def client(self) -> Any:
        if self._client is None:
            from tenki import Client

            self._client = Client(api_key=self.api_key, base_url=self.base_url, rpc=self.rpc,
                                  warning_handler=None)
        return self._client

    def check_spec(self, spec: SandboxSpec) -> None:
        if spec.network_policy is not None and spec.network_policy not in NETWORK_POLICIES:
            raise SandboxUnsupported(
                f"the '{self.name}' sandbox provider cannot enforce network policy "
                f"'{spec.network_policy}' (it enforces: {', '.join(NETWORK_POLICIES)})"
            )
        super().check_spec(SandboxSpec(name=spec.name, mode=spec.mode))

    async def create(self, spec: SandboxSpec) -> TenkiSandbox:
        from tenki_sandbox.errors import SandboxError as TenkiError

        self.check_spec(spec)
        sandbox_name = f"agentenv-{_slug(spec.name)}-{secrets.token_hex(3)}"
        arguments: dict[str, Any] = {
            "name": sandbox_name,
            "workspace_id": self.workspace_id,
            "cpu_cores": math.ceil(spec.cpu) if spec.cpu else None,
            "memory_mb": spec.memory_mb,
            # Tenki disks are 5 to 100 GB: a smaller request gets the smallest disk
            "disk_size_gb": max(MIN_DISK_GB, math.ceil(spec.disk_mb / 1024))
            if spec.disk_mb else None,
            "max_duration": spec.ttl_seconds,
            "metadata": {**spec.labels, **ownership_labels(spec.ttl_seconds), MODE_KEY: spec.mode},
            "env": dict(spec.env_vars) or None,
            "snapshot_id": self.snapshot_id,
            "image": self.image if spec.mode == "vm" else (spec.image or self.image),
            **NETWORK_POLICIES.get(spec.network_policy or "", {}),
        }
        if arguments["snapshot_id"]:
            arguments["image"] = None
        try:
            handle = await asyncio.to_thread(
                self.client.create, **{k: v for k, v in arguments.items() if v is not None}
            )
        except TenkiError as exc:
            raise SandboxError(f"tenki could not create sandbox {sandbox_name}: {exc}") \
                from None
        sandbox = TenkiSandbox(handle, spec.mode)
        for port in spec.ports:  # listed ports get their URL at once
            try:
                await sandbox.expose(port)
            except BaseException:
                await asyncio.shield(sandbox.terminate())  # leave nothing behind
                raise
        return sandbox

    async def attach(self, sandbox_id: str) -> TenkiSandbox | None:
        from tenki_sandbox.errors import SandboxError as TenkiError

        try:
            handle = await asyncio.to_thread(self.client.get, sandbox_id)
        except TenkiError:
            return None
        if handle.state in ("TERMINATING", "TERMINATED", "USER_SHUTDOWN"):
            return None
        return TenkiSandbox(handle, handle.info.metadata.get(MODE_KEY, "vm"))

    async def list_sandboxes(self, labels: dict[str, str]) -> list[Sandbox]:
        items = await asyncio.to_thread(self.client.list, workspace_id=self.workspace_id)
        return [TenkiSandbox(handle, handle.info.metadata.get(MODE_KEY, "vm"))
                for handle in items
                if handle.state not in ("TERMINATING", "TERMINATED", "USER_SHUTDOWN")
                and all(handle.info.metadata.get(k) == v for k, v in labels.items())]

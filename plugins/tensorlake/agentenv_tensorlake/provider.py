"""The ``tensorlake`` sandbox provider: Tensorlake cloud sandboxes through the ``tensorlake`` SDK.

``mode="vm"`` sandboxes boot from a Docker-capable image (``image``, default
``agentenv-dind-host-v1``): env types build and run their containers on the daemon inside
(``agent_env.api.DockerHostSandbox``), and a published container port is exposed as the
sandbox's public URL.
``mode="container"`` sandboxes boot from ``SandboxSpec.image`` and only run commands.

Config, ``[sandbox.providers.tensorlake.config]``: the keyword parameters of the provider's
constructor, which the kernel checks the table against.

Exec output is framed in base64 inside the sandbox, because the SDK hands back output as lines
(a trailing newline, or binary output, would otherwise be lost). Any SDK transport failure
during ``exec`` is exit code ``-1``, as the contract says.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
import secrets
import shlex
from typing import Any, ClassVar

from agent_env.api import (
    ConfigError,
    DockerHostSandbox,
    ExecResult,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxUnsupported,
    missing_sdk,
)

DEFAULT_IMAGE = "agentenv-dind-host-v1"
DEFAULT_API_URL = "https://api.tensorlake.ai"
CONFIG_TABLE = "[sandbox.providers.tensorlake.config]"
#: Network policies Tensorlake enforces, and the create arguments each one means.
NETWORK_POLICIES: dict[str, dict[str, Any]] = {"no-internet": {"allow_internet_access": False}}
TIMEOUT_EXIT_CODE = 124
_NAME = re.compile(r"^agentenv-(vm|container)-")

#: Where spec env vars live in a sandbox (the SDK's create takes none); every exec reads it.
ENV_FILE = "/etc/agentenv-env.sh"
#: Runs ``"$@"`` with its output in files, then prints both base64-encoded (one line each).
_FRAMED = (
    f'[ -r {ENV_FILE} ] && . {ENV_FILE}; '
    'o=$(mktemp) && e=$(mktemp) || exit 125; "$@" >"$o" 2>"$e" </dev/null; c=$?; '
    'base64 -w0 <"$o"; echo; base64 -w0 <"$e" >&2; echo >&2; rm -f "$o" "$e"; exit $c'
)


def _decode(framed: str) -> str:
    import base64
    import binascii

    text = framed.strip()
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return framed  # no base64 in the image: the SDK's lines are the best we have


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:32] or "sandbox"


class TensorlakeSandbox(DockerHostSandbox):
    """One Tensorlake sandbox; ``handle`` is the SDK's ``AsyncSandbox``."""

    provider_name = "tensorlake"

    def __init__(self, provider: TensorlakeSandboxProvider, handle: Any, sandbox_id: str,
                 mode: str, image: str) -> None:
        self.provider = provider
        self.handle = handle
        self.id = sandbox_id
        self.mode = mode
        self.image = image

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "image": self.image}

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        from tensorlake.sandbox import SandboxException

        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        try:
            traced = await self.handle.run("bash", ["-c", _FRAMED, "agentenv", *argv],
                                           env=env, working_dir=cwd, timeout=timeout)
        except SandboxException as exc:
            return ExecResult(-1, "", f"lost tensorlake sandbox {self.id}: {exc}")
        result = traced.value if hasattr(traced, "value") else traced
        if getattr(result, "timed_out", False):
            return ExecResult(TIMEOUT_EXIT_CODE, "", f"timed out after {timeout:g}s")
        return ExecResult(int(result.exit_code), _decode(result.stdout), _decode(result.stderr))

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        from tensorlake.sandbox import SandboxException

        parent = posixpath.dirname(path) or "."
        made = await self.exec(["mkdir", "-p", parent])
        if made.exit_code != 0:
            raise SandboxError(f"cannot create {parent} in tensorlake sandbox {self.id}: "
                               f"{made.stderr.strip()}")
        try:
            await self.handle.write_file(path, data)
        except SandboxException as exc:
            raise SandboxError(f"cannot write {path} in tensorlake sandbox {self.id}: {exc}") \
                from None
        changed = await self.exec(["chmod", f"{mode:o}", path])
        if changed.exit_code != 0:
            raise SandboxError(f"cannot chmod {path} in tensorlake sandbox {self.id}")

    async def get_file(self, path: str) -> bytes:
        from tensorlake.sandbox import RemoteAPIError, SandboxException

        try:
            traced = await self.handle.read_file(path)
        except RemoteAPIError as exc:
            if getattr(exc, "status_code", None) == 404:
                raise FileNotFoundError(f"{path} does not exist in tensorlake sandbox "
                                        f"{self.id}") from None
            raise SandboxError(f"cannot read {path} in tensorlake sandbox {self.id}: {exc}") \
                from None
        except SandboxException as exc:
            raise SandboxError(f"cannot read {path} in tensorlake sandbox {self.id}: {exc}") \
                from None
        return bytes(traced.value if hasattr(traced, "value") else traced)

    async def expose(self, port: int) -> str:
        """Make ``port`` public (the gateway's own token guards what it serves)."""
        from tensorlake.sandbox import SandboxException

        client = await self.provider.client()
        try:
            traced = await client.expose_ports(self.id, [port],
                                               allow_unauthenticated_access=True)
        except SandboxException as exc:
            raise SandboxError(f"cannot expose port {port} of tensorlake sandbox {self.id}: "
                               f"{exc}") from None
        info = traced.value if hasattr(traced, "value") else traced
        url = info.url_for_port(port)
        if not url:
            raise SandboxError(f"tensorlake gave no URL for port {port} of sandbox {self.id}")
        return str(url).rstrip("/")

    async def terminate(self) -> None:
        from tensorlake.sandbox import SandboxException, SandboxNotFoundError

        with contextlib.suppress(Exception):  # a best-effort close
            self.handle.close()
        client = await self.provider.client()
        try:
            await client.delete(self.id)
        except SandboxNotFoundError:
            pass
        except SandboxException as exc:
            if "not found" not in str(exc).lower():
                raise SandboxError(f"cannot terminate tensorlake sandbox {self.id}: {exc}") \
                    from None

    async def start_docker(self) -> None:
        """The image's Docker daemon, started here when the image did not start it."""
        await self.start_dockerd(f"set image in {CONFIG_TABLE} to a Docker-capable image "
                                 f"(the default is {DEFAULT_IMAGE})")


class TensorlakeSandboxProvider(SandboxProvider):
    """Sandboxes in Tensorlake's cloud (``[sandbox.providers.tensorlake.config]``)."""

    name: ClassVar[str] = "tensorlake"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")

    def __init__(
        self,
        *,
        api_key: str | None = None,
        image: str = DEFAULT_IMAGE,
        api_url: str = DEFAULT_API_URL,
        organization_id: str | None = None,
        project_id: str | None = None,
        startup_timeout: float = 300.0,
    ) -> None:
        """``api_key`` is required (``env:NAME`` works) but has a default so that a missing one
        gets this message with an example, like an empty one; ``image`` what ``vm`` sandboxes
        boot (Docker-capable); ``api_url``, ``organization_id``, ``project_id`` where;
        ``startup_timeout`` seconds a sandbox may take to start.
        """
        if not api_key:  # absent, or an env: reference to an empty variable
            raise ConfigError(
                f"the tensorlake sandbox provider needs an API key: set api_key in "
                f"{CONFIG_TABLE} of .agentenv/config.toml (for example "
                "api_key = \"env:TENSORLAKE_API_KEY\")"
            )
        self.api_key = api_key
        self.image = image or DEFAULT_IMAGE
        self.api_url = api_url or DEFAULT_API_URL
        self.organization_id = organization_id
        self.project_id = project_id
        self.startup_timeout = float(startup_timeout)
        self._client: Any = None

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; a missing key is a config error, said on construction."""
        return missing_sdk("tensorlake", "tensorlake")

    async def client(self) -> Any:
        """The SDK's lifecycle client, made on first use."""
        if self._client is None:
            from tensorlake.sandbox import AsyncSandboxClient

            self._client = AsyncSandboxClient.for_cloud(
                api_key=self.api_key, organization_id=self.organization_id,
                project_id=self.project_id, api_url=self.api_url,
            )
        return self._client

    def check_spec(self, spec: SandboxSpec) -> None:
        if spec.network_policy in NETWORK_POLICIES:
            super().check_spec(SandboxSpec(name=spec.name, mode=spec.mode))
            return
        if spec.network_policy is not None:
            raise SandboxUnsupported(
                f"the '{self.name}' sandbox provider cannot enforce network policy "
                f"'{spec.network_policy}' (it enforces: {', '.join(NETWORK_POLICIES)})"
            )
        super().check_spec(spec)

    async def create(self, spec: SandboxSpec) -> TensorlakeSandbox:
        from tensorlake.sandbox import SandboxException

        self.check_spec(spec)
        image = self.image if spec.mode == "vm" else (spec.image or self.image)
        name = f"agentenv-{spec.mode}-{_slug(spec.name)}-{secrets.token_hex(3)}"
        client = await self.client()
        arguments: dict[str, Any] = {
            "image": image, "cpus": spec.cpu, "memory_mb": spec.memory_mb,
            "disk_mb": spec.disk_mb, "timeout_secs": spec.ttl_seconds, "name": name,
            "exposed_ports": list(spec.ports) or None,
            "allow_unauthenticated_access": True if spec.ports else None,
            "startup_timeout": self.startup_timeout,
            **NETWORK_POLICIES.get(spec.network_policy or "", {}),
        }
        try:
            handle = await client.create_and_connect(
                **{k: v for k, v in arguments.items() if v is not None}
            )
        except SandboxException as exc:
            raise SandboxError(f"tensorlake could not create sandbox {name}: {exc}") from None
        sandbox = TensorlakeSandbox(self, handle, str(handle.sandbox_id), spec.mode, image)
        if spec.env_vars:
            try:
                await self._write_env(sandbox, spec.env_vars)
            except BaseException:
                await asyncio.shield(sandbox.terminate())  # leave nothing behind
                raise
        return sandbox

    async def _write_env(self, sandbox: TensorlakeSandbox, env_vars: dict[str, str]) -> None:
        """Spec env vars: exported by a profile file every ``bash -c`` of ours reads."""
        lines = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env_vars.items()))
        await sandbox.handle.write_file(ENV_FILE, lines.encode())

    async def attach(self, sandbox_id: str) -> TensorlakeSandbox | None:
        from tensorlake.sandbox import SandboxException, SandboxNotFoundError

        client = await self.client()
        try:
            traced = await client.get(sandbox_id)
        except SandboxNotFoundError:
            return None
        except SandboxException as exc:
            if "not found" in str(exc).lower():
                return None
            raise SandboxError(f"cannot look up tensorlake sandbox {sandbox_id}: {exc}") \
                from None
        info = traced.value if hasattr(traced, "value") else traced
        if str(getattr(info.status, "value", info.status)) in ("terminated", "failed"):
            return None
        try:
            handle = await client.connect(sandbox_id)
        except SandboxException:
            return None
        match = _NAME.match(info.name or "")
        mode = match.group(1) if match else "vm"
        return TensorlakeSandbox(self, handle, sandbox_id, mode, info.image or self.image)


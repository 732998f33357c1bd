"""The ``daytona`` sandbox provider: Daytona cloud sandboxes through the ``daytona`` SDK.

``mode="vm"`` sandboxes boot a Docker host: the configured ``snapshot``, or else an image
Daytona builds (and caches) from ``base_image`` plus Docker Engine and Compose. Env types build
and run their containers on the daemon inside (``agent_env.api.DockerHostSandbox``), and a
published container port is served on the sandbox's public preview URL.
``mode="container"`` sandboxes boot ``SandboxSpec.image`` and only run commands.

Config, ``[sandbox.providers.daytona.config]``: the reference's six keys (``api_key``,
``api_url``, ``target``, ``snapshot``, ``base_image``, ``egress_hosts``), which the kernel
checks the table against.

Why commands are framed: Daytona's ``process.exec`` answers one combined output string, so the
sandbox prints the command's stdout and stderr base64-encoded on two lines of their own (binary
output and trailing newlines survive, and the two streams stay apart) in one request. Any SDK
failure to answer during ``exec`` is exit code ``-1``, as the contract says.
"""

from __future__ import annotations

import contextlib
import math
import posixpath
import re
import secrets
import shlex
from collections.abc import Mapping
from typing import Any, ClassVar

from agent_env.api import (
    ConfigError,
    DockerHostSandbox,
    ExecResult,
    LoopClient,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    create_without_leaks,
    delete_with_retries,
    get_logger,
    missing_sdk,
    timed_argv,
    timed_result,
)

log = get_logger("agentenv_daytona")

DEFAULT_API_URL = "https://app.daytona.io/api"
#: Daytona's own sandbox image (Debian, a ``daytona`` user with passwordless sudo).
DEFAULT_BASE_IMAGE = "daytonaio/sandbox:0.9.0"
CONFIG_TABLE = "[sandbox.providers.daytona.config]"
#: Network policies Daytona enforces, and the create arguments each one means.
NETWORK_POLICIES: dict[str, dict[str, Any]] = {"no-internet": {"network_block_all": True}}
MANAGED_LABEL = "agentenv.managed"
MODE_LABEL = "agentenv.mode"
#: Docker-in-Docker needs at least this much (Daytona's guidance): vCPU, GiB memory, GiB disk.
DOCKER_FLOOR = (2, 4, 10)
#: Seconds a create may take: a first create from an image builds it; a snapshot only boots.
IMAGE_CREATE_TIMEOUT = 1800.0
SNAPSHOT_CREATE_TIMEOUT = 300.0
CREATE_ATTEMPTS = 5
DELETE_ATTEMPTS = 5
GONE_STATES = frozenset({"destroyed", "destroying", "error", "build_failed"})

#: Docker Engine and Compose on a Debian or Ubuntu base, from Docker's apt repository; the
#: ``daytona`` user (commands run as it) gets passwordless sudo to start the daemon.
HOST_IMAGE_STEPS = (
    "apt-get update",
    "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
    "ca-certificates curl sudo procps",
    "install -m 0755 -d /etc/apt/keyrings",
    ". /etc/os-release && curl -fsSL https://download.docker.com/linux/$ID/gpg "
    "-o /etc/apt/keyrings/docker.asc",
    '. /etc/os-release && echo "deb [signed-by=/etc/apt/keyrings/docker.asc] '
    'https://download.docker.com/linux/$ID $VERSION_CODENAME stable" '
    "> /etc/apt/sources.list.d/docker.list",
    "apt-get update",
    "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
    "docker-ce docker-ce-cli containerd.io docker-buildx-plugin docker-compose-plugin",
    "(id -u daytona >/dev/null 2>&1 || useradd -m -s /bin/bash daytona)",
    "echo 'daytona ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-agentenv",
    "rm -rf /var/lib/apt/lists/*",
)

#: Runs ``"$@"`` with its output in files, then prints stdout and stderr base64-encoded, one
#: line each, on stdout (Daytona's exec answers one combined string).
_FRAMED = (
    'o=$(mktemp) && e=$(mktemp) || exit 125; "$@" >"$o" 2>"$e" </dev/null; c=$?; '
    'base64 -w0 <"$o"; echo; base64 -w0 <"$e"; echo; rm -f "$o" "$e"; exit $c'
)


def _unframe(result: str) -> tuple[str, str]:
    import base64
    import binascii

    lines = result.removesuffix("\n").split("\n")
    if len(lines) >= 2:
        try:
            out = base64.b64decode(lines[-2], validate=True)
            err = base64.b64decode(lines[-1], validate=True)
        except (binascii.Error, ValueError):
            pass
        else:
            return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    return result, ""  # no framing came back (no base64 in the image): the raw output


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:32] or "sandbox"


def _state(handle: Any) -> str:
    state = getattr(handle, "state", None)
    return str(getattr(state, "value", state) or "").lower()


class DaytonaSandbox(DockerHostSandbox):
    """One Daytona sandbox; its SDK handle is fetched again when the provider's client changed
    (a handle is bound to the client, and so to the event loop, that made it)."""

    provider_name = "daytona"

    def __init__(self, provider: DaytonaSandboxProvider, handle: Any, mode: str) -> None:
        self.provider = provider
        self._handle = handle
        self._client = provider.clients.current
        self.id = str(handle.id)
        self.mode = mode

    @property
    def labels(self) -> dict[str, str]:
        """The sandbox's Daytona labels (``agent-env gc`` judges a leftover by them)."""
        return dict(self._handle.labels or {})

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "name": self._handle.name}

    async def handle(self) -> Any:
        client = await self.provider.clients.get()
        if client is not self._client:
            self._handle, self._client = await client.get(self.id), client
        return self._handle

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        from daytona import DaytonaError

        script = shlex.join(["sh", "-c", _FRAMED, "agentenv",
                             *timed_argv(command, timeout, shell="sh")])
        wait = None if timeout is None else math.ceil(timeout) + 10
        try:
            handle = await self.handle()
            answer = await handle.process.exec(script, cwd=cwd, env=env, timeout=wait)
        except DaytonaError as exc:
            return ExecResult(-1, "", f"lost daytona sandbox {self.id}: {exc}")
        code = -1 if answer.exit_code is None else int(answer.exit_code)
        return timed_result(code, *_unframe(answer.result or ""), timeout)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        from daytona import DaytonaError

        parent = posixpath.dirname(path) or "."
        made = await self.exec(["mkdir", "-p", parent])
        if made.exit_code != 0:
            raise SandboxError(f"cannot create {parent} in daytona sandbox {self.id}: "
                               f"{made.stderr.strip()}")
        try:
            await (await self.handle()).fs.upload_file(data, path)
        except DaytonaError as exc:
            raise SandboxError(f"cannot write {path} in daytona sandbox {self.id}: {exc}") \
                from None
        changed = await self.exec(["chmod", f"{mode:o}", path])
        if changed.exit_code != 0:
            raise SandboxError(f"cannot chmod {path} in daytona sandbox {self.id}: "
                               f"{changed.stderr.strip()}")

    async def get_file(self, path: str) -> bytes:
        from daytona import DaytonaError, DaytonaNotFoundError

        try:
            data = await (await self.handle()).fs.download_file(path)
        except DaytonaNotFoundError:
            raise FileNotFoundError(f"{path} does not exist in daytona sandbox {self.id}") \
                from None
        except DaytonaError as exc:
            raise SandboxError(f"cannot read {path} in daytona sandbox {self.id}: {exc}") \
                from None
        return bytes(data or b"")

    async def expose(self, port: int) -> str:
        """The port's preview URL: sandboxes are created public, so it needs no token (the
        gateway's own token guards what it serves)."""
        from daytona import DaytonaError

        try:
            link = await (await self.handle()).get_preview_link(port)
        except DaytonaError as exc:
            raise SandboxError(f"cannot expose port {port} of daytona sandbox {self.id}: "
                               f"{exc}") from None
        return str(link.url).rstrip("/")

    async def terminate(self) -> None:
        from daytona import DaytonaError, DaytonaNotFoundError

        try:
            handle = await self.handle()
        except DaytonaNotFoundError:
            return
        except DaytonaError as exc:
            raise SandboxError(f"cannot terminate daytona sandbox {self.id}: {exc}") from None
        await self.provider.delete(handle)

    async def start_docker(self) -> None:
        """Start the image's ``dockerd``: Daytona leaves it to the sandbox."""
        await self.start_dockerd(f"leave snapshot unset in {CONFIG_TABLE} (the provider then "
                                 "builds a Docker host image) or name a Docker-capable snapshot")


class DaytonaSandboxProvider(SandboxProvider):
    """Sandboxes in Daytona's cloud (``[sandbox.providers.daytona.config]``)."""

    name: ClassVar[str] = "daytona"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")
    network_policies: ClassVar[tuple[str, ...]] = tuple(NETWORK_POLICIES)

    def __init__(
        self,
        *,
        api_key: str | None = None,
        api_url: str = DEFAULT_API_URL,
        target: str | None = None,
        snapshot: str | None = None,
        base_image: str | None = None,
        egress_hosts: list[str] | tuple[str, ...] = (),
    ) -> None:
        """``api_key`` is required (``env:NAME`` works); ``api_url`` and ``target`` (region)
        say where; ``snapshot`` is a Docker-capable snapshot ``vm`` sandboxes boot, else they
        boot ``base_image`` with Docker added (not both); ``egress_hosts`` is the reference's
        allowlist, accepted so its table loads: our policies (none, ``no-internet``) have no
        allowlist, so it changes nothing.
        """
        if not api_key:  # absent, or an env: reference to an empty variable
            raise ConfigError(
                f"the daytona sandbox provider needs an API key: set api_key in {CONFIG_TABLE} "
                "of .agentenv/config.toml (for example api_key = \"env:DAYTONA_API_KEY\")"
            )
        if snapshot and base_image:
            raise ConfigError(f"{CONFIG_TABLE} takes snapshot or base_image, not both: "
                              "remove one of them")
        if isinstance(egress_hosts, str) or not all(
                isinstance(h, str) and h.strip() for h in egress_hosts):
            raise ConfigError(f"{CONFIG_TABLE} egress_hosts must be a list of host names, "
                              "for example [\"*.internal.example\"]")
        if egress_hosts:
            log.warning("daytona.egress_hosts_unused", hosts=list(egress_hosts),
                        reason="no network policy of ours is an allowlist")
        self.api_key = api_key
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self.target = target
        self.snapshot = snapshot
        self.base_image = base_image or DEFAULT_BASE_IMAGE
        self.egress_hosts = tuple(egress_hosts)
        self.clients: LoopClient[Any] = LoopClient(self._make_client, lambda c: c.close())

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; a missing key is a config error, said on construction."""
        return missing_sdk("daytona", "daytona")

    def _make_client(self) -> Any:
        from daytona import AsyncDaytona, DaytonaConfig

        return AsyncDaytona(DaytonaConfig(api_key=self.api_key, api_url=self.api_url,
                                          target=self.target))

    # -- create ----------------------------------------------------------------------------

    def create_params(self, spec: SandboxSpec, name: str) -> tuple[Any, float]:
        """The SDK's create parameters for ``spec``, and how long the create may take."""
        from daytona import (
            CreateSandboxFromImageParams,
            CreateSandboxFromSnapshotParams,
            Image,
            Resources,
        )

        floor = DOCKER_FLOOR if spec.mode == "vm" else (1, 1, 1)
        resources = Resources(
            cpu=max(floor[0], math.ceil(spec.cpu or 0)),
            memory=max(floor[1], math.ceil((spec.memory_mb or 0) / 1024)),
            disk=max(floor[2], math.ceil((spec.disk_mb or 0) / 1024)),
        )
        common: dict[str, Any] = {
            "name": name, "env_vars": dict(spec.env_vars) or None,
            "labels": {**spec.labels, MANAGED_LABEL: "true", MODE_LABEL: spec.mode},
            "public": True, "auto_stop_interval": 0, "auto_delete_interval": 0,
            "ttl_minutes": math.ceil(spec.ttl_seconds / 60) if spec.ttl_seconds else None,
            **NETWORK_POLICIES.get(spec.network_policy or "", {}),
        }
        common = {k: v for k, v in common.items() if v is not None}
        if spec.mode == "vm" and self.snapshot:
            return (CreateSandboxFromSnapshotParams(snapshot=self.snapshot, **common),
                    SNAPSHOT_CREATE_TIMEOUT)
        if spec.mode == "vm":
            image: Any = Image.base(self.base_image).dockerfile_commands(["USER root"]) \
                .run_commands(" && ".join(HOST_IMAGE_STEPS)).dockerfile_commands(["USER daytona"])
        else:
            image = spec.image or self.base_image
        return (CreateSandboxFromImageParams(image=image, resources=resources, **common),
                IMAGE_CREATE_TIMEOUT)

    async def create(self, spec: SandboxSpec) -> DaytonaSandbox:
        self.check_spec(spec)
        name = f"agentenv-{spec.mode}-{_slug(spec.name)}-{secrets.token_hex(3)}"
        params, timeout = self.create_params(spec, name)
        handle = await self._create(params, name, timeout)
        return DaytonaSandbox(self, handle, spec.mode)

    async def _create(self, params: Any, name: str, timeout: float) -> Any:
        """``client.create``, leaving no sandbox behind (what a failed or cancelled create made
        is found by its unique name), its errors one line each."""
        from daytona import (
            DaytonaAuthenticationError,
            DaytonaError,
            DaytonaForbiddenError,
            DaytonaRateLimitError,
            DaytonaValidationError,
        )

        client = await self.clients.get()

        async def reclaim(handle: Any) -> None:
            if handle is None:
                await self._delete_named(name)
            else:
                with contextlib.suppress(SandboxError):
                    await self.delete(handle)

        try:
            return await create_without_leaks(
                lambda: client.create(params, timeout=timeout), reclaim,
                retry_on=(DaytonaRateLimitError,), attempts=CREATE_ATTEMPTS,
                made_nothing=(DaytonaAuthenticationError, DaytonaForbiddenError,
                              DaytonaValidationError))
        except DaytonaRateLimitError as exc:
            raise SandboxError(f"daytona kept rate-limiting the create of sandbox {name} "
                               f"({CREATE_ATTEMPTS} attempts): {exc}") from None
        except DaytonaAuthenticationError as exc:
            raise SandboxError(f"daytona refused the API key: check api_key in {CONFIG_TABLE} "
                               f"({exc})") from None
        except DaytonaError as exc:
            raise SandboxError(f"daytona could not create sandbox {name}: {exc}") from None

    async def _delete_named(self, name: str) -> None:
        from daytona import DaytonaError, DaytonaNotFoundError

        client = await self.clients.get()
        try:
            handle = await client.get(name)
        except DaytonaNotFoundError:
            return
        except DaytonaError as exc:
            log.error("daytona.leftover", sandbox=name, error=str(exc),
                      fix="agent-env gc finds it by its agentenv.managed label")
            return
        with contextlib.suppress(SandboxError):
            await self.delete(handle)

    async def delete(self, handle: Any) -> None:
        """Delete a sandbox; gone or being deleted already is fine, a conflicting state change
        and a failing API are retried, then reported (``agent-env gc`` finds what is left)."""
        from daytona import DaytonaConflictError, DaytonaError, DaytonaNotFoundError

        async def attempt() -> None:
            try:
                await handle.delete()
            except DaytonaConflictError:  # another change in progress: fine if it is a delete
                with contextlib.suppress(DaytonaError):
                    await handle.refresh_data()
                if _state(handle) not in GONE_STATES:
                    raise

        error = await delete_with_retries(attempt, retry_on=(DaytonaError,),
                                          gone=(DaytonaNotFoundError,), attempts=DELETE_ATTEMPTS)
        if error is not None:
            raise SandboxError(f"cannot terminate daytona sandbox {handle.id} after "
                               f"{DELETE_ATTEMPTS} attempts: {error}")

    # -- find ------------------------------------------------------------------------------

    async def attach(self, sandbox_id: str) -> DaytonaSandbox | None:
        from daytona import DaytonaError, DaytonaNotFoundError

        client = await self.clients.get()
        try:
            handle = await client.get(sandbox_id)
        except DaytonaNotFoundError:
            return None
        except DaytonaError as exc:
            raise SandboxError(f"cannot look up daytona sandbox {sandbox_id}: {exc}") from None
        if _state(handle) in GONE_STATES:
            return None
        return DaytonaSandbox(self, handle, _mode(handle.labels))

    async def list_sandboxes(self, labels: dict[str, str]) -> list[DaytonaSandbox]:
        from daytona import DaytonaError, ListSandboxesQuery

        client = await self.clients.get()
        found: list[DaytonaSandbox] = []
        try:
            async for handle in client.list(ListSandboxesQuery(labels={**labels})):
                if _state(handle) not in GONE_STATES and all(
                        (handle.labels or {}).get(k) == v for k, v in labels.items()):
                    found.append(DaytonaSandbox(self, handle, _mode(handle.labels)))
        except DaytonaError as exc:
            raise SandboxError(f"cannot list daytona sandboxes: {exc}") from None
        return found


def _mode(labels: Mapping[str, str] | None) -> str:
    mode = (labels or {}).get(MODE_LABEL, "vm")
    return mode if mode in ("vm", "container") else "vm"

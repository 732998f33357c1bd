"""The ``vercel`` sandbox provider: Vercel Sandbox through the ``vercel-sandbox`` SDK.

A Vercel sandbox is a microVM, so this provider makes ``mode="vm"`` sandboxes only: Docker is
started in it (installed first when the image lacks it) and env types run their containers on
that daemon (``agent_env.api.DockerHostSandbox``). Vercel makes a port public only when the
sandbox is created with it, so every sandbox is created with ``PUBLIC_PORTS`` (plus the spec's
own ports), and a published container port is bound to the next free one of them. A
``mode="container"`` request (an image of its own) is refused by name.

Config, ``[sandbox.providers.vercel.config]``: the reference's keys (``image``, ``region``,
``failover_regions``, ``network_id``, ``token``, ``team_id``, ``project_id``) plus ``api_url``
(another API endpoint); the kernel checks the table against them. Without ``token``,
``team_id`` and ``project_id`` the SDK finds its own credentials (Vercel's OIDC token).

Any SDK failure to answer during ``exec`` is exit code ``-1``, as the contract says.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from datetime import timedelta
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

CONFIG_TABLE = "[sandbox.providers.vercel.config]"
DEFAULT_IMAGE = "vercel/sandbox/universal"
#: Ports every sandbox is created with, for containers to publish on (Vercel allows 15).
PUBLIC_PORTS = (3000, 3001, 3002, 3003)
MAX_PORTS = 15
MANAGED_LABEL = "agentenv.managed"
#: Vercel keeps at most five tags: the labels gc judges a leftover by, in this order.
TAG_LABELS = ("agentenv.run", "agentenv.expires", "agentenv.owner", "agentenv.state",
              MANAGED_LABEL)
NETWORK_POLICIES = ("no-internet",)
DEFAULT_TTL_SECONDS = 3 * 3600
MEMORY_PER_VCPU_MB = 2048
MAX_VCPUS = 32
CREATE_ATTEMPTS = 5
DELETE_ATTEMPTS = 5
#: Installs Docker where the image has none (Vercel's images are Amazon Linux; apt elsewhere).
INSTALL_DOCKER = (
    'S=""; [ "$(id -u)" = 0 ] || S="sudo -n"; command -v dockerd >/dev/null && exit 0; '
    "if command -v dnf >/dev/null; then $S dnf install -y -q docker >/dev/null; "
    "else $S apt-get update -qq && $S env DEBIAN_FRONTEND=noninteractive "
    "apt-get install -y -qq docker.io >/dev/null; fi"
)


def vcpus_for(spec: SandboxSpec) -> int:
    """Vercel sizes by vCPU (2 GiB each, even counts above one): the smallest covering the
    spec's CPU and memory; more than the largest is refused before anything is created."""
    vcpus = max(math.ceil(spec.cpu or 1), math.ceil((spec.memory_mb or 0) / MEMORY_PER_VCPU_MB),
                1)
    if vcpus > 1 and vcpus % 2:
        vcpus += 1
    if vcpus > MAX_VCPUS:
        raise SandboxUnsupported(f"the 'vercel' sandbox provider's largest sandbox has "
                                 f"{MAX_VCPUS} vCPUs; {spec.cpu} CPU and {spec.memory_mb} MB "
                                 "were asked for")
    return vcpus


def _status(error: BaseException) -> int | None:
    return getattr(getattr(error, "response", None), "status_code", None) or getattr(
        error, "status_code", None)


class VercelSandbox(DockerHostSandbox):
    """One Vercel sandbox, addressed by its name."""

    provider_name = "vercel"
    mode = "vm"

    def __init__(self, provider: VercelSandboxProvider, handle: Any) -> None:
        self.provider = provider
        self._handle = handle
        self.id = str(handle.name)
        self.labels = dict(handle.tags or {})
        self.routes = {int(r.port): str(r.url) for r in handle.routes}

    def host_ports(self) -> tuple[int, ...]:
        return tuple(port for port in PUBLIC_PORTS if port in self.routes)

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        try:
            done = await self._handle.run_process(
                "sh", ["-c", 'exec "$@" </dev/null', "agentenv", *timed_argv(command, timeout)],
                cwd=cwd, env=env,
                capture_output=True)
        except Exception as exc:  # the SDK's API errors and its HTTP client's: no answer
            return ExecResult(-1, "", f"lost vercel sandbox {self.id}: {type(exc).__name__}: "
                                      f"{exc}")
        return timed_result(int(done.returncode), done.stdout or "", done.stderr or "", timeout)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Written through Vercel's file API (a tar upload, which makes the parent folders)."""
        from vercel.sandbox import SandboxError as VercelError

        try:
            await self._handle.fs.write_bytes(path, data, mode=mode)
        except VercelError as exc:
            raise SandboxError(f"cannot write {path} in vercel sandbox {self.id}: {exc}") \
                from None

    async def get_file(self, path: str) -> bytes:
        from vercel.sandbox import SandboxError as VercelError
        from vercel.sandbox import SandboxPathNotFoundError

        try:
            return bytes(await self._handle.fs.read_bytes(path))
        except SandboxPathNotFoundError:
            raise FileNotFoundError(f"{path} does not exist in vercel sandbox {self.id}") \
                from None
        except VercelError as exc:
            raise SandboxError(f"cannot read {path} in vercel sandbox {self.id}: {exc}") \
                from None

    async def expose(self, port: int) -> str:
        """The port's public URL: Vercel gives one only to a port the sandbox was made with."""
        url = self.routes.get(port)
        if url is None:
            raise SandboxUnsupported(
                f"the vercel sandbox provider cannot expose port {port} of sandbox {self.id}: "
                f"Vercel makes public only the ports a sandbox is created with "
                f"({', '.join(map(str, sorted(self.routes))) or 'none'})")
        return url.rstrip("/")

    async def terminate(self) -> None:
        await self.provider.delete(self.id)

    async def start_docker(self) -> None:
        """Install Docker when the image has none, then start its daemon."""
        installed = await self.exec(INSTALL_DOCKER, timeout=600)
        if installed.exit_code != 0:
            raise SandboxUnsupported(
                f"could not install Docker in vercel sandbox {self.id} (exit "
                f"{installed.exit_code}: {installed.stderr.strip()[-300:]}); set image in "
                f"{CONFIG_TABLE} to one with Docker")
        await self.start_dockerd(f"set image in {CONFIG_TABLE} to one with Docker")


class VercelSandboxProvider(SandboxProvider):
    """Sandboxes on Vercel (``[sandbox.providers.vercel.config]``)."""

    name: ClassVar[str] = "vercel"
    modes: ClassVar[tuple[str, ...]] = ("vm",)
    network_policies: ClassVar[tuple[str, ...]] = NETWORK_POLICIES

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        region: str | None = None,
        failover_regions: list[str] | None = None,
        network_id: str | None = None,
        token: str | None = None,
        team_id: str | None = None,
        project_id: str | None = None,
        api_url: str | None = None,
    ) -> None:
        """``token``, ``team_id`` and ``project_id`` go together (``env:NAME`` works), or are
        all left out for the SDK's own credentials; ``image`` is what sandboxes boot;
        ``region``, ``failover_regions`` and ``network_id`` say where; ``api_url`` points at
        another API endpoint.
        """
        given = [key for key, value in (("token", token), ("team_id", team_id),
                                        ("project_id", project_id)) if value]
        if given and len(given) != 3:
            missing = ", ".join(k for k in ("token", "team_id", "project_id") if k not in given)
            raise ConfigError(
                f"{CONFIG_TABLE} takes token, team_id and project_id together (missing: "
                f"{missing}); or leave all three out to use Vercel's OIDC credentials")
        if not given:
            self._check_ambient_credentials()
        if failover_regions is not None and (isinstance(failover_regions, str) or not all(
                isinstance(r, str) for r in failover_regions)):
            raise ConfigError(f"{CONFIG_TABLE} failover_regions must be a list of region names")
        self.image = image or DEFAULT_IMAGE
        self.region = region
        self.failover_regions = list(failover_regions) if failover_regions else None
        self.network_id = network_id
        self.token, self.team_id, self.project_id = token, team_id, project_id
        self.api_url = api_url
        self.clients: LoopClient[Any] = LoopClient(self._make_client, lambda c: c.aclose())

    @staticmethod
    def _check_ambient_credentials() -> None:
        """Without configured credentials the SDK finds its own (Vercel's OIDC token, or
        ``VERCEL_TOKEN`` with ``VERCEL_TEAM_ID`` and ``VERCEL_PROJECT_ID``); none is one error
        before the run, not a failed deploy."""
        if missing_sdk("vercel", "vercel") is not None:
            return  # availability() says what is missing
        from vercel.oidc.credentials import get_credentials

        try:
            get_credentials()
        except Exception as exc:
            raise ConfigError(
                f"the vercel sandbox provider has no credentials: set token, team_id and "
                f"project_id in {CONFIG_TABLE} of .agentenv/config.toml (for example token = "
                f"\"env:VERCEL_TOKEN\"), or run where Vercel's OIDC token is set ({exc})"
            ) from None

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; missing credentials are said on construction."""
        return missing_sdk("vercel", "vercel", "vercel-sandbox")

    def _make_client(self) -> Any:
        from vercel.sandbox import SandboxClient, SandboxCredentials, SandboxServiceOptions

        options: dict[str, Any] = {"base_url": self.api_url, "region": self.region}
        if self.token:
            credentials = SandboxCredentials(token=self.token, team_id=str(self.team_id),
                                             project_id=str(self.project_id))

            async def factory() -> Any:
                return credentials

            options["credentials_factory"] = factory
        return SandboxClient.create(options=SandboxServiceOptions(
            **{k: v for k, v in options.items() if v is not None}))

    async def create(self, spec: SandboxSpec) -> VercelSandbox:
        from vercel.sandbox import NetworkPolicy, SandboxResources

        self.check_spec(spec)
        vcpus = vcpus_for(spec)
        ports = list(dict.fromkeys([*PUBLIC_PORTS, *spec.ports]))
        if len(ports) > MAX_PORTS:
            raise SandboxUnsupported(f"the 'vercel' sandbox provider makes at most {MAX_PORTS} "
                                     f"ports public; {len(ports)} were needed")
        labels = {**spec.labels, MANAGED_LABEL: "true"}
        name = f"agentenv-{secrets.token_hex(6)}"
        arguments: dict[str, Any] = {
            "name": name, "image": self.image, "ports": ports,
            "execution_time_limit": timedelta(seconds=spec.ttl_seconds or DEFAULT_TTL_SECONDS),
            "resources": SandboxResources(vcpus=vcpus, memory=vcpus * MEMORY_PER_VCPU_MB),
            "env": dict(spec.env_vars) or None,
            "tags": {k: labels[k] for k in TAG_LABELS if k in labels},
            "network_policy": NetworkPolicy.deny_all() if spec.network_policy else None,
            "region": self.region, "failover_regions": self.failover_regions,
            "network_id": self.network_id,
        }
        handle = await self._create({k: v for k, v in arguments.items() if v is not None})
        return VercelSandbox(self, handle)

    async def _create(self, arguments: dict[str, Any]) -> Any:
        """``create_sandbox``, leaving no sandbox behind (what a failed or cancelled create
        made is found by its unique name), its errors one line each."""
        from vercel.sandbox import SandboxCredentialsError
        from vercel.sandbox import SandboxError as VercelError

        client = await self.clients.get()
        name = arguments["name"]

        async def reclaim(_: Any) -> None:
            await self._delete_quietly(name)

        try:
            return await create_without_leaks(
                lambda: client.create_sandbox(**arguments), reclaim,
                retry_on=lambda e: _status(e) == 429, attempts=CREATE_ATTEMPTS,
                # refused before anything was made: credentials, a bad request
                made_nothing=lambda e: isinstance(e, SandboxCredentialsError)
                or 400 <= (_status(e) or 0) < 500)
        except SandboxCredentialsError as exc:
            raise SandboxError(f"vercel has no credentials: set token, team_id and "
                               f"project_id in {CONFIG_TABLE} ({exc})") from None
        except VercelError as exc:
            if _status(exc) in (401, 403):
                raise SandboxError(f"vercel refused the credentials: check token, team_id "
                                   f"and project_id in {CONFIG_TABLE} ({exc})") from None
            raise SandboxError(f"vercel could not create sandbox {name}: {exc}") from None

    async def _delete_quietly(self, name: str) -> None:
        with contextlib.suppress(SandboxError):
            await self.delete(name)

    async def delete(self, name: str) -> None:
        """Destroy a sandbox; one already gone is fine, a failing API is retried, then
        reported (``agent-env gc`` finds what is left by its tags)."""
        from vercel.sandbox import SandboxError as VercelError

        client = await self.clients.get()

        async def destroy() -> None:
            await (await client.get_sandbox(name=name)).destroy()

        error = await delete_with_retries(destroy, retry_on=(VercelError,),
                                          gone=lambda e: _status(e) == 404,
                                          attempts=DELETE_ATTEMPTS)
        if error is not None:
            raise SandboxError(f"cannot destroy vercel sandbox {name} after {DELETE_ATTEMPTS} "
                               f"attempts: {error}")

    async def attach(self, sandbox_id: str) -> VercelSandbox | None:
        from vercel.sandbox import SandboxError as VercelError

        try:
            handle = await (await self.clients.get()).get_sandbox(name=sandbox_id)
        except VercelError as exc:
            if _status(exc) == 404:
                return None
            raise SandboxError(f"cannot look up vercel sandbox {sandbox_id}: {exc}") from None
        if str(getattr(handle.status, "value", handle.status)) in ("stopped", "failed",
                                                                   "aborted"):
            return None
        return VercelSandbox(self, handle)

    async def list_sandboxes(self, labels: dict[str, str]) -> list[VercelSandbox]:
        from vercel.sandbox import SandboxError as VercelError
        from vercel.sandbox import SandboxQueryByCreatedAt, TagFilter

        first = next(((k, labels[k]) for k in TAG_LABELS if k in labels),
                     (MANAGED_LABEL, "true"))
        query = SandboxQueryByCreatedAt(tag=TagFilter(key=first[0], value=first[1]))
        found: list[VercelSandbox] = []
        try:
            async for handle in (await self.clients.get()).query_sandboxes(query=query):
                tags = dict(handle.tags or {})
                if str(getattr(handle.status, "value", handle.status)) in ("stopped", "failed"):
                    continue
                if all(tags.get(k) == v for k, v in labels.items() if k in TAG_LABELS):
                    found.append(VercelSandbox(self, handle))
        except VercelError as exc:
            raise SandboxError(f"cannot list vercel sandboxes: {exc}") from None
        return found

    def __repr__(self) -> str:
        return f"VercelSandboxProvider(image={self.image!r}, region={self.region!r})"


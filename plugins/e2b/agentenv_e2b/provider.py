"""The ``e2b`` sandbox provider: E2B cloud sandboxes through the ``e2b`` SDK.

An E2B sandbox is a microVM booted from a template, so this provider makes ``mode="vm"``
sandboxes only, from ``base_template``, which must carry Docker: env types build and run their
containers on the daemon inside (``agent_env.api.DockerHostSandbox``), and a published container
port is served on the sandbox's public host (``<port>-<id>.<domain>``). A ``mode="container"``
request (an image of its own) is refused by name: E2B boots templates, not images.

Config, ``[sandbox.providers.e2b.config]``: the reference's keys (``api_key``,
``base_template``) plus, for a self-hosted E2B, ``api_url``, ``domain`` and ``sandbox_url``;
the kernel checks the table against them.

Any SDK failure to answer during ``exec`` is exit code ``-1``, as the contract says.
"""

from __future__ import annotations

import contextlib
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
    create_without_leaks,
    delete_with_retries,
    get_logger,
    missing_sdk,
    timed_argv,
    timed_result,
)

log = get_logger("agentenv_e2b")

CONFIG_TABLE = "[sandbox.providers.e2b.config]"
#: Network policies E2B enforces, and the create arguments each one means.
NETWORK_POLICIES: dict[str, dict[str, Any]] = {"no-internet": {"allow_internet_access": False}}
MANAGED_LABEL = "agentenv.managed"
#: A label unique to one create, so a create that failed after E2B made the sandbox finds it.
CREATE_LABEL = "agentenv.create"
DEFAULT_TTL_SECONDS = 3600
CREATE_ATTEMPTS = 5
KILL_ATTEMPTS = 5
#: Seconds to wait for E2B to answer a create.
CREATE_REQUEST_TIMEOUT = 300.0


class E2BSandbox(DockerHostSandbox):
    """One E2B sandbox; the SDK's ``AsyncSandbox`` is connected on first use (a sandbox found
    by ``attach`` or ``list_sandboxes`` needs none to be torn down)."""

    provider_name = "e2b"
    mode = "vm"

    def __init__(self, provider: E2BSandboxProvider, sandbox_id: str,
                 labels: dict[str, str], handle: Any = None) -> None:
        self.provider = provider
        self.id = sandbox_id
        self.labels = dict(labels)
        self._handle = handle

    async def handle(self) -> Any:
        if self._handle is None:
            from e2b import AsyncSandbox

            self._handle = await AsyncSandbox.connect(self.id, **self.provider.api_params())
        return self._handle

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        from e2b import CommandExitException

        try:
            handle = await self.handle()
            done = await handle.commands.run(
                shlex.join(timed_argv(command, timeout)), envs=env, cwd=cwd,
                timeout=timeout + 30 if timeout else 0,  # 0: no limit (ours is `timeout`)
            )
        except CommandExitException as exc:
            code, stdout, stderr = int(exc.exit_code), exc.stdout, exc.stderr
        except Exception as exc:  # the SDK's transport and API errors: no answer came back
            return ExecResult(-1, "", f"lost e2b sandbox {self.id}: {type(exc).__name__}: "
                                      f"{exc}")
        else:
            code, stdout, stderr = int(done.exit_code), done.stdout, done.stderr
        return timed_result(code, stdout or "", stderr or "", timeout)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Written through envd's file API (which makes the parent folders)."""
        from e2b import SandboxException

        try:
            await (await self.handle()).files.write(path, data)
        except SandboxException as exc:
            raise SandboxError(f"cannot write {path} in e2b sandbox {self.id}: {exc}") \
                from None
        if mode != 0o644:
            changed = await self.exec(["chmod", f"{mode:o}", path])
            if changed.exit_code != 0:
                raise SandboxError(f"cannot chmod {path} in e2b sandbox {self.id}: "
                                   f"{changed.stderr.strip()}")

    async def get_file(self, path: str) -> bytes:
        from e2b import NotFoundException, SandboxException

        try:
            data = await (await self.handle()).files.read(path, format="bytes")
        except NotFoundException:
            raise FileNotFoundError(f"{path} does not exist in e2b sandbox {self.id}") \
                from None
        except SandboxException as exc:
            raise SandboxError(f"cannot read {path} in e2b sandbox {self.id}: {exc}") from None
        return bytes(data)

    async def expose(self, port: int) -> str:
        """Every port of a sandbox has a public host; the gateway's token guards what it
        serves."""
        return f"{self.provider.ingress_scheme}://{(await self.handle()).get_host(port)}"

    async def terminate(self) -> None:
        await self.provider.kill(self.id)

    async def start_docker(self) -> None:
        """Start the template's ``dockerd`` (E2B starts only envd)."""
        await self.start_dockerd(f"set base_template in {CONFIG_TABLE} to a template with "
                                 "Docker installed")


class E2BSandboxProvider(SandboxProvider):
    """Sandboxes in E2B's cloud (``[sandbox.providers.e2b.config]``)."""

    name: ClassVar[str] = "e2b"
    modes: ClassVar[tuple[str, ...]] = ("vm",)
    network_policies: ClassVar[tuple[str, ...]] = tuple(NETWORK_POLICIES)

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_template: str | None = None,
        api_url: str | None = None,
        domain: str | None = None,
        sandbox_url: str | None = None,
    ) -> None:
        """``api_key`` and ``base_template`` (a template with Docker, which every sandbox
        boots) are required; ``api_url``, ``domain`` and ``sandbox_url`` (envd's address)
        point at a self-hosted E2B.
        """
        if not api_key:  # absent, or an env: reference to an empty variable
            raise ConfigError(
                f"the e2b sandbox provider needs an API key: set api_key in {CONFIG_TABLE} of "
                ".agentenv/config.toml (for example api_key = \"env:E2B_API_KEY\")"
            )
        if not base_template or not base_template.strip():
            raise ConfigError(
                f"the e2b sandbox provider needs a template with Docker: set base_template in "
                f"{CONFIG_TABLE} (a template name or id, for example "
                "base_template = \"my-team/docker-host\")"
            )
        self.api_key = api_key
        self.base_template = base_template.strip()
        self.api_url = api_url
        self.domain = domain
        self.sandbox_url = sandbox_url
        #: Public port URLs are https, unless envd is reached over plain http (self-hosted).
        self.ingress_scheme = "http" if (sandbox_url or "").startswith("http://") else "https"

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; a missing key is a config error, said on construction."""
        return missing_sdk("e2b", "e2b")

    def api_params(self) -> dict[str, Any]:
        """What every SDK call takes to reach this account."""
        params = {"api_key": self.api_key, "api_url": self.api_url, "domain": self.domain,
                  "sandbox_url": self.sandbox_url}
        return {k: v for k, v in params.items() if v is not None}

    async def create(self, spec: SandboxSpec) -> E2BSandbox:
        from e2b import AsyncSandbox

        self.check_spec(spec)
        if spec.cpu or spec.memory_mb or spec.disk_mb:
            log.info("e2b.size_from_template", template=self.base_template,
                     asked={"cpu": spec.cpu, "memory_mb": spec.memory_mb,
                            "disk_mb": spec.disk_mb})
        marker = secrets.token_hex(8)
        labels = {**spec.labels, MANAGED_LABEL: "true", CREATE_LABEL: marker}
        arguments: dict[str, Any] = {
            "template": self.base_template, "timeout": spec.ttl_seconds or DEFAULT_TTL_SECONDS,
            "metadata": labels, "envs": dict(spec.env_vars) or None,
            "request_timeout": CREATE_REQUEST_TIMEOUT,
            **NETWORK_POLICIES.get(spec.network_policy or "", {}), **self.api_params(),
        }
        handle = await self._create(AsyncSandbox, arguments, marker)
        return E2BSandbox(self, str(handle.sandbox_id), labels, handle)

    async def _create(self, sandbox_class: Any, arguments: dict[str, Any], marker: str) -> Any:
        """``AsyncSandbox.create``, leaving no sandbox behind (what a failed or cancelled
        create made is found by its marker label), its errors one line each."""
        from e2b import AuthenticationException, RateLimitException, SandboxException

        async def reclaim(handle: Any) -> None:
            if handle is None:
                await self._kill_marked(marker)
            else:
                with contextlib.suppress(SandboxError):
                    await self.kill(str(handle.sandbox_id))

        try:
            return await create_without_leaks(
                lambda: sandbox_class.create(**arguments), reclaim,
                retry_on=(RateLimitException,), made_nothing=(AuthenticationException,),
                attempts=CREATE_ATTEMPTS)
        except RateLimitException as exc:
            raise SandboxError(f"e2b kept rate-limiting the sandbox create "
                               f"({CREATE_ATTEMPTS} attempts): {exc}") from None
        except AuthenticationException as exc:
            raise SandboxError(f"e2b refused the API key: check api_key in {CONFIG_TABLE} "
                               f"({exc})") from None
        except SandboxException as exc:
            raise SandboxError(f"e2b could not create a sandbox from template "
                               f"{arguments['template']}: {exc}") from None

    async def _kill_marked(self, marker: str) -> None:
        try:
            made = await self.list_sandboxes({CREATE_LABEL: marker})
        except SandboxError as exc:
            log.error("e2b.leftover", marker=marker, error=str(exc),
                      fix="agent-env gc finds it by its agentenv.managed label")
            return
        for sandbox in made:
            with contextlib.suppress(SandboxError):
                await sandbox.terminate()

    async def kill(self, sandbox_id: str) -> None:
        """Kill a sandbox; one already gone is fine, a failing API is retried, then reported
        (``agent-env gc`` finds what is left by label)."""
        from e2b import AsyncSandbox, AuthenticationException, SandboxException

        try:  # AsyncSandbox.kill answers False for a sandbox gone already
            error = await delete_with_retries(
                lambda: AsyncSandbox.kill(sandbox_id, **self.api_params()),
                retry_on=(SandboxException,), attempts=KILL_ATTEMPTS)
        except AuthenticationException as exc:
            raise SandboxError(f"e2b refused the API key killing sandbox {sandbox_id}: "
                               f"check api_key in {CONFIG_TABLE} ({exc})") from None
        if error is not None:
            raise SandboxError(f"cannot kill e2b sandbox {sandbox_id} after {KILL_ATTEMPTS} "
                               f"attempts: {error}")

    async def attach(self, sandbox_id: str) -> E2BSandbox | None:
        from e2b import AsyncSandbox, AuthenticationException, NotFoundException, SandboxException

        try:
            info = await AsyncSandbox.get_info(sandbox_id, **self.api_params())
        except NotFoundException:
            return None
        except (SandboxException, AuthenticationException) as exc:
            raise SandboxError(f"cannot look up e2b sandbox {sandbox_id}: {exc}") from None
        if str(getattr(info.state, "value", info.state)) != "running":
            return None
        return E2BSandbox(self, sandbox_id, dict(info.metadata or {}))

    async def list_sandboxes(self, labels: dict[str, str]) -> list[E2BSandbox]:
        from e2b import (
            AsyncSandbox,
            AuthenticationException,
            SandboxException,
            SandboxQuery,
            SandboxState,
        )

        pages = AsyncSandbox.list(query=SandboxQuery(metadata=dict(labels) or None,
                                                     state=[SandboxState.RUNNING]),
                                  **self.api_params())
        found: list[E2BSandbox] = []
        try:
            while pages.has_next:
                for info in await pages.next_items():
                    metadata = dict(info.metadata or {})
                    if all(metadata.get(k) == v for k, v in labels.items()):
                        found.append(E2BSandbox(self, str(info.sandbox_id), metadata))
        except (SandboxException, AuthenticationException) as exc:
            raise SandboxError(f"cannot list e2b sandboxes: {exc}") from None
        return found

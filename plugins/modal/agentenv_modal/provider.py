"""The ``modal`` and ``modal_vm`` sandbox providers: Modal Sandboxes through the ``modal`` SDK.

``modal`` makes both kinds of sandbox: ``mode="container"`` boots ``SandboxSpec.image`` (pulled
by Modal from its registry) and only runs commands; ``mode="vm"`` boots a Modal VM sandbox
(``experimental_options={"vm_runtime": True}``: a kernel of its own, so Docker runs inside),
and env types build and run their containers on that daemon
(``agent_env.api.DockerHostSandbox``). ``modal_vm`` is the reference's name for the VM kind
alone. Envs deploy into one VM sandbox, not one container sandbox per service.

Modal makes a port public only when the sandbox is created with it, so every VM sandbox is
created with ``PUBLIC_PORTS`` (plus the spec's own) as encrypted tunnels, and a published
container port is bound to the next free one of them.

Config, ``[sandbox.providers.modal.config]`` (or ``modal_vm``): the reference's keys
(``app_name``, ``environment_name``; ``modal`` also ``gpu``, ``ecr_pull_secret_name``) plus
``token_id``/``token_secret`` (else the SDK's own: ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET`` or
the active profile of ``~/.modal.toml``; none at all is one error before the run) and
``vm_image`` (a registry image with Docker for VM sandboxes; default: Ubuntu with Docker, built
and cached by Modal). The API endpoint is the
SDK's own setting (``MODAL_SERVER_URL``).

Sandboxes carry the run's labels as Modal tags (``agent-env gc`` finds leftovers by them) and
a timeout at their TTL. Any SDK failure to answer during ``exec`` is exit code ``-1``, as the
contract says.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import tomllib
from pathlib import Path
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

DEFAULT_APP_NAME = "agent-env"
#: The reference's override of the app name, kept.
APP_NAME_VAR = "AGENT_ENV_MODAL_APP_NAME"
MANAGED_LABEL = "agentenv.managed"
MODE_LABEL = "agentenv.mode"
#: A tag only one create carries: what a failed or cancelled create made is found by it.
CREATE_LABEL = "agentenv.create"
#: Ports every VM sandbox is created with as tunnels, for containers to publish on.
PUBLIC_PORTS = (8000, 8001, 8002, 8003)
NETWORK_POLICIES = ("no-internet",)
DEFAULT_TTL_SECONDS = 3 * 3600
MAX_TTL_SECONDS = 24 * 3600  # Modal's longest sandbox timeout
VM_FLOOR = (2.0, 4096)  # vCPU and MiB a VM sandbox running Docker gets at least
CREATE_ATTEMPTS = 5
DELETE_ATTEMPTS = 5
#: The main process: it keeps the sandbox up (a VM's dockerd is started by exec).
KEEP_ALIVE = ("sh", "-c", "while :; do sleep 3600; done")
NOT_FOUND_EXIT = 66
#: Ubuntu with Docker, built by Modal on first use and cached there.
DOCKER_PACKAGES = ("docker.io", "curl", "ca-certificates", "python3")


def _table(name: str) -> str:
    return f"[sandbox.providers.{name}.config]"


def sdk_credentials() -> tuple[str, str] | None:
    """The credentials the SDK would use: ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``, else the
    profile of ``~/.modal.toml`` (``MODAL_CONFIG_PATH``) named by ``MODAL_PROFILE`` or marked
    active. Read without importing the SDK, so a missing token is said before a run starts."""
    token_id, token_secret = os.environ.get("MODAL_TOKEN_ID"), \
        os.environ.get("MODAL_TOKEN_SECRET")
    if token_id and token_secret:
        return token_id, token_secret
    path = Path(os.environ.get("MODAL_CONFIG_PATH") or Path.home() / ".modal.toml")
    try:
        profiles = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    wanted = os.environ.get("MODAL_PROFILE")
    for name, profile in profiles.items():
        if isinstance(profile, dict) and (name == wanted if wanted else profile.get("active")):
            if profile.get("token_id") and profile.get("token_secret"):
                return str(profile["token_id"]), str(profile["token_secret"])
    return None


class ModalSandbox(DockerHostSandbox):
    """One Modal sandbox, addressed by its object id."""

    provider_name = "modal"

    def __init__(self, provider: ModalSandboxProvider, handle: Any, mode: str,
                 ports: tuple[int, ...] = ()) -> None:
        self.provider = provider
        self.provider_name = provider.name
        self.handle = handle
        self.id = str(handle.object_id)
        self.mode = mode
        self.ports = ports
        self.labels: dict[str, str] = {}

    def host_ports(self) -> tuple[int, ...]:
        return tuple(port for port in PUBLIC_PORTS if port in self.ports) \
            if self.mode == "vm" else ()

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        try:
            code, out, err = await self._run(timed_argv(command, timeout), cwd=cwd, env=env)
        except Exception as exc:  # the SDK's errors, and grpclib's under them
            return ExecResult(-1, "", f"lost modal sandbox {self.id}: {type(exc).__name__}: "
                                      f"{exc}")
        return timed_result(code, out.decode("utf-8", "replace"),
                            err.decode("utf-8", "replace"), timeout)

    async def _run(self, argv: list[str], *, cwd: str | None = None,
                   env: dict[str, str] | None = None,
                   stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
        """One process in the sandbox: its exit code, stdout and stderr."""
        process = await self.handle.exec.aio(*argv, workdir=cwd, env=env or None, text=False)
        if stdin is not None:
            process.stdin.write(stdin)
            process.stdin.write_eof()
            await process.stdin.drain.aio()
        out, err = await asyncio.gather(process.stdout.read.aio(), process.stderr.read.aio())
        code = await process.wait.aio()
        return int(code), bytes(out), bytes(err)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Over the process's stdin (Modal caps a command's arguments well below a file)."""
        script = 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"'
        try:
            code, _, err = await self._run(["sh", "-c", script, "sh", path, f"{mode:o}"],
                                           stdin=data)
        except Exception as exc:
            raise SandboxError(f"cannot write {path} in modal sandbox {self.id}: {exc}") \
                from None
        if code != 0:
            raise SandboxError(f"cannot write {path} in modal sandbox {self.id}: "
                               f"{err.decode('utf-8', 'replace').strip()}")

    async def get_file(self, path: str) -> bytes:
        script = f'[ -f "$1" ] || exit {NOT_FOUND_EXIT}; cat "$1"'
        try:
            code, out, err = await self._run(["sh", "-c", script, "sh", path])
        except Exception as exc:
            raise SandboxError(f"cannot read {path} in modal sandbox {self.id}: {exc}") \
                from None
        if code == NOT_FOUND_EXIT:
            raise FileNotFoundError(f"{path} does not exist in modal sandbox {self.id}")
        if code != 0:
            raise SandboxError(f"cannot read {path} in modal sandbox {self.id}: "
                               f"{err.decode('utf-8', 'replace').strip()}")
        return out

    async def expose(self, port: int) -> str:
        """The tunnel Modal made for ``port`` at create time (none is made later)."""
        try:
            tunnels = await self.handle.tunnels.aio()
        except Exception as exc:
            raise SandboxError(f"cannot list the tunnels of modal sandbox {self.id}: "
                               f"{exc}") from None
        tunnel = tunnels.get(port)
        if tunnel is None:
            raise SandboxUnsupported(
                f"modal sandbox {self.id} has no tunnel for port {port}: Modal opens only the "
                f"ports a sandbox is created with ({', '.join(map(str, sorted(tunnels)))})")
        suffix = "" if tunnel.port == 443 else f":{tunnel.port}"
        return f"{self.provider.tunnel_scheme}://{tunnel.host}{suffix}"

    async def terminate(self) -> None:
        await self.provider.delete(self.id)

    async def start_docker(self) -> None:
        if self.mode != "vm":
            raise SandboxUnsupported(f"modal container sandbox {self.id} runs no Docker: ask "
                                     "for a vm sandbox")
        await self.start_dockerd(f"set vm_image in {_table(self.provider.name)} to an image "
                                 "with Docker, or leave it unset (Ubuntu with Docker)")


class ModalSandboxProvider(SandboxProvider):
    """Sandboxes on Modal (``[sandbox.providers.modal.config]``)."""

    name: ClassVar[str] = "modal"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")
    network_policies: ClassVar[tuple[str, ...]] = NETWORK_POLICIES

    def __init__(
        self,
        *,
        app_name: str | None = None,
        environment_name: str | None = None,
        gpu: str | None = None,
        ecr_pull_secret_name: str | None = None,
        token_id: str | None = None,
        token_secret: str | None = None,
        vm_image: str | None = None,
    ) -> None:
        """``app_name`` is the Modal app sandboxes belong to (default ``agent-env``, or
        ``$AGENT_ENV_MODAL_APP_NAME``); ``environment_name`` the Modal environment; ``gpu`` a
        GPU for container sandboxes ("H100", "A10G:2"); ``ecr_pull_secret_name`` the Modal
        secret that pulls images from ECR; ``token_id``/``token_secret`` the credentials (else
        the SDK's own); ``vm_image`` a registry image with Docker for VM sandboxes.
        """
        if bool(token_id) != bool(token_secret):
            raise ConfigError(f"the {self.name} sandbox provider needs token_id and "
                              f"token_secret together in {_table(self.name)}")
        self.app_name = app_name or os.environ.get(APP_NAME_VAR) or DEFAULT_APP_NAME
        self.environment_name = environment_name
        self.gpu = gpu
        self.ecr_pull_secret_name = ecr_pull_secret_name
        self.credentials = (token_id, token_secret) if token_id and token_secret \
            else sdk_credentials()
        if self.credentials is None:
            raise ConfigError(
                f"the {self.name} sandbox provider has no Modal credentials: set "
                "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, run `modal token new`, or set "
                f"token_id and token_secret in {_table(self.name)}")
        self.vm_image = vm_image
        self.clients: LoopClient[Any] = LoopClient(self._make_client, lambda c: c.close.aio())
        self._apps: dict[int, Any] = {}

    @classmethod
    def availability(cls) -> str | None:
        """Usable when the SDK imports; missing credentials are a config error, said on
        construction."""
        return missing_sdk("modal", "modal", "Modal")

    @property
    def tunnel_scheme(self) -> str:
        """https, unless the API is a plain-http one on this machine (a local Modal)."""
        from modal.config import config

        return "http" if str(config["server_url"]).startswith("http://") else "https"

    async def _make_client(self) -> Any:
        import modal

        assert self.credentials is not None
        return await modal.Client.from_credentials.aio(*self.credentials)

    async def _app(self, client: Any) -> Any:
        import modal

        app = self._apps.get(id(client))
        if app is None:
            app = await modal.App.lookup.aio(self.app_name, create_if_missing=True,
                                             client=client,
                                             environment_name=self.environment_name)
            self._apps = {id(client): app}
        return app

    def _image(self, spec: SandboxSpec) -> Any:
        import modal

        if spec.mode == "vm":
            if self.vm_image:
                return modal.Image.from_registry(self.vm_image)
            return modal.Image.from_registry("ubuntu:22.04").apt_install(*DOCKER_PACKAGES)
        if not spec.image:
            raise SandboxUnsupported(f"a {self.name} container sandbox needs an image")
        if self.ecr_pull_secret_name and ".dkr.ecr." in spec.image:
            return modal.Image.from_aws_ecr(spec.image, secret=modal.Secret.from_name(
                self.ecr_pull_secret_name, environment_name=self.environment_name))
        return modal.Image.from_registry(spec.image)

    def create_arguments(self, spec: SandboxSpec, marker: str) -> dict[str, Any]:
        """``Sandbox.create``'s keyword arguments for ``spec`` (without app, image, client)."""
        cpu, memory = spec.cpu or 1.0, spec.memory_mb or 2048
        arguments: dict[str, Any] = {
            "tags": {**spec.labels, MANAGED_LABEL: "true", MODE_LABEL: spec.mode,
                     CREATE_LABEL: marker},
            "timeout": min(spec.ttl_seconds or DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS),
            "env": dict(spec.env_vars) or None,
        }
        if spec.network_policy == "no-internet":
            # An empty egress allowlist: nothing out, tunnels in (block_network would close
            # the tunnels too, and Modal refuses it with ports).
            arguments["outbound_cidr_allowlist"] = []
        if spec.mode == "vm":
            cpu, memory = max(cpu, VM_FLOOR[0]), max(memory, VM_FLOOR[1])
            arguments["experimental_options"] = {"vm_runtime": True}
            arguments["encrypted_ports"] = sorted({*PUBLIC_PORTS, *spec.ports})
        else:
            arguments["encrypted_ports"] = sorted(spec.ports)
            if self.gpu:
                arguments["gpu"] = self.gpu
        arguments["cpu"], arguments["memory"] = float(cpu), int(memory)
        return arguments

    async def create(self, spec: SandboxSpec) -> ModalSandbox:
        self.check_spec(spec)
        import modal
        from modal.exception import (
            AuthError,
            InvalidError,
            NotFoundError,
            PermissionDeniedError,
            ResourceExhaustedError,
        )

        marker = secrets.token_hex(8)
        arguments = self.create_arguments(spec, marker)
        client = await self.clients.get()
        image = self._image(spec)

        async def make() -> Any:
            app = await self._app(client)
            return await modal.Sandbox.create.aio(*KEEP_ALIVE, app=app, image=image,
                                                  client=client, **arguments)

        async def reclaim(handle: Any) -> None:
            await self._delete_quietly(handle.object_id if handle is not None else None, marker)

        try:
            handle = await create_without_leaks(
                make, reclaim, retry_on=(ResourceExhaustedError,), attempts=CREATE_ATTEMPTS,
                made_nothing=(AuthError, PermissionDeniedError, InvalidError, NotFoundError))
        except ResourceExhaustedError as exc:
            raise SandboxError(f"Modal kept refusing a sandbox for rate or quota "
                               f"({CREATE_ATTEMPTS} attempts): {exc}") from None
        except (AuthError, PermissionDeniedError) as exc:
            raise SandboxError(f"Modal refused the credentials: check token_id and "
                               f"token_secret in {_table(self.name)} or MODAL_TOKEN_ID "
                               f"({exc})") from None
        except NotFoundError as exc:
            raise SandboxError(f"Modal could not find what the sandbox needs (app "
                               f"{self.app_name!r}, environment {self.environment_name!r}, "
                               f"or image): {exc}") from None
        except modal.exception.Error as exc:
            raise SandboxError(f"Modal could not create a sandbox: {type(exc).__name__}: "
                               f"{exc}") from None
        sandbox = ModalSandbox(self, handle, spec.mode, tuple(arguments["encrypted_ports"]))
        sandbox.labels = dict(arguments["tags"])
        return sandbox

    async def _delete_quietly(self, sandbox_id: str | None, marker: str) -> None:
        """Terminate what one create made: by id, or every sandbox carrying its marker (the
        SDK retries a create the API failed, so there may be several)."""
        with contextlib.suppress(SandboxError):
            ids = [sandbox_id] if sandbox_id is not None else \
                [s.id for s in await self.list_sandboxes({CREATE_LABEL: marker})]
            for made in ids:
                await self.delete(made)

    async def delete(self, sandbox_id: str) -> None:
        """Terminate a sandbox by id; one already gone is fine, a failing API is retried,
        then reported (``agent-env gc`` finds what is left by its tags)."""
        import modal
        from modal.exception import NotFoundError

        client = await self.clients.get()

        async def attempt() -> None:
            handle = await modal.Sandbox.from_id.aio(sandbox_id, client=client)
            await handle.terminate.aio()

        error = await delete_with_retries(attempt, retry_on=(modal.exception.Error,),
                                          gone=(NotFoundError,), attempts=DELETE_ATTEMPTS)
        if error is not None:
            raise SandboxError(f"cannot terminate modal sandbox {sandbox_id} after "
                               f"{DELETE_ATTEMPTS} attempts: {error}")

    async def _wrap(self, handle: Any, tags: dict[str, str] | None = None) -> ModalSandbox:
        tags = tags if tags is not None else await handle.get_tags.aio()
        mode = tags.get(MODE_LABEL, "vm")
        sandbox = ModalSandbox(self, handle, mode if mode in ("vm", "container") else "vm",
                               PUBLIC_PORTS if mode == "vm" else ())
        sandbox.labels = dict(tags)
        return sandbox

    async def attach(self, sandbox_id: str) -> ModalSandbox | None:
        import modal
        from modal.exception import NotFoundError

        client = await self.clients.get()
        try:
            handle = await modal.Sandbox.from_id.aio(sandbox_id, client=client)
            if await handle.poll.aio() is not None:  # it has exited: terminated or timed out
                return None
            return await self._wrap(handle)
        except NotFoundError:
            return None
        except modal.exception.Error as exc:
            raise SandboxError(f"cannot look up modal sandbox {sandbox_id}: {exc}") from None

    async def list_sandboxes(self, labels: dict[str, str]) -> list[ModalSandbox]:
        import modal

        client = await self.clients.get()
        found = []
        try:
            app = await self._app(client)
            async for handle in modal.Sandbox.list.aio(app_id=app.app_id,
                                                       tags=dict(labels) or None,
                                                       client=client):
                found.append(await self._wrap(handle))
        except modal.exception.Error as exc:
            raise SandboxError(f"cannot list modal sandboxes: {exc}") from None
        return found


class ModalVmSandboxProvider(ModalSandboxProvider):
    """Modal VM sandboxes only (``[sandbox.providers.modal_vm.config]``): the reference's
    ``modal_vm``."""

    name: ClassVar[str] = "modal_vm"
    modes: ClassVar[tuple[str, ...]] = ("vm",)

    def __init__(
        self,
        *,
        app_name: str | None = None,
        environment_name: str | None = None,
        token_id: str | None = None,
        token_secret: str | None = None,
        vm_image: str | None = None,
    ) -> None:
        """The keys of ``modal`` that apply to VM sandboxes."""
        super().__init__(app_name=app_name, environment_name=environment_name,
                         token_id=token_id, token_secret=token_secret, vm_image=vm_image)

"""The ``smol_vm`` sandbox provider: one local microVM per env or agent, with its own Docker.

Why a VM each: workloads stay off the host's Docker daemon. A ``mode="vm"`` sandbox boots
``image`` (default ``docker:27-dind``, a guest with a Docker daemon); env images are built on
the host and handed over as ``docker save`` archives loaded inside (no registry pulls), then
run there (``agent_env.api.DockerHostSandbox``); a published port is published again from the
guest to 127.0.0.1 on the host. ``mode="container"`` boots ``SandboxSpec.image`` and only runs
commands.

Availability is a real probe boot (``local_availability()`` can say yes where every boot
fails, e.g. under a paravirtual KVM), done once per process. On Apple Silicon the guest is
arm64: an amd64 image is refused with a message saying to build for linux/arm64.

Config, ``[sandbox.providers.smol_vm.config]``: the keyword parameters of
:meth:`SmolVmSandboxProvider.from_config`, which the kernel checks the table against.
"""

from __future__ import annotations

import asyncio
import functools
import os
import platform
import secrets
import stat
from typing import Any, ClassVar

from agent_env.api import (
    DockerHostSandbox,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxUnsupported,
    hermetic_context,
    ownership_labels,
)

DEFAULT_IMAGE = "docker:27-dind"
CONFIG_TABLE = "[sandbox.providers.smol_vm.config]"
MODE_LABEL = "agentenv.mode"
TIMEOUT_EXIT_CODE = 124
PROBE_NAME = "agentenv-probe"


def apple_silicon() -> bool:
    return platform.system() == "Darwin" and platform.machine() in ("arm64", "aarch64")


def prepare_environment() -> None:
    """Known setup: as root with /dev/kvm 0600 the VMM must keep root (no uid drop)."""
    try:
        mode = stat.S_IMODE(os.stat("/dev/kvm").st_mode)
    except OSError:
        return
    if os.geteuid() == 0 and mode == 0o600:
        os.environ.setdefault("SMOLVM_VM_UID_DROP", "off")


def host_problem() -> str | None:
    """Why this host cannot run microVMs at all, before trying a boot."""
    if apple_silicon():
        return None
    if platform.system() != "Linux":
        return (f"smol_vm needs Linux with KVM or Apple Silicon macOS (this is "
                f"{platform.system()} {platform.machine()})")
    if not os.path.exists("/dev/kvm"):
        return "smol_vm needs KVM: /dev/kvm does not exist (enable virtualization or use docker)"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "smol_vm needs KVM: /dev/kvm is not readable and writable by this user"
    return None


def probe_boot(machine_api: Any, config_api: Any) -> str | None:
    """Boot a tiny VM and run ``true`` in it; None when that worked, else why not."""
    machine = None
    try:
        machine = machine_api.create(config_api(name=f"{PROBE_NAME}-{secrets.token_hex(3)}"))
        result = machine.exec(["true"])
        if result.exit_code != 0:
            return f"the probe microVM booted but could not run a command: {result.stderr}"
    except Exception as exc:
        return (f"a probe microVM did not boot ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); this host's KVM "
                "cannot run the guest (a paravirtual or nested KVM often cannot): use a host "
                "with hardware virtualization, or the docker provider")
    finally:
        if machine is not None:
            try:
                machine.delete()
            except Exception:
                pass
    return None


@functools.cache
def _cached_availability() -> str | None:
    prepare_environment()
    problem = host_problem()
    if problem:
        return problem
    try:
        from smol import Machine, MachineConfig
    except ImportError:
        return "the smolmachines SDK is not installed (pip install 'agentenv-framework[smol]')"
    return probe_boot(Machine, MachineConfig)


class SmolVmSandbox(DockerHostSandbox):
    """One microVM; ``machine`` is the SDK's ``Machine``."""

    provider_name = "smol_vm"

    def __init__(self, provider: SmolVmSandboxProvider, machine: Any, mode: str) -> None:
        self.provider = provider
        self.machine = machine
        self.id = str(machine.name)
        self.mode = mode
        self.gone = False

    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        if self.gone:
            return ExecResult(-1, "", f"the microVM {self.id} was terminated")
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        options = self.provider.exec_options(env=env, workdir=cwd, timeout=timeout)
        try:
            result = await asyncio.to_thread(self.machine.exec, argv, options)
        except Exception as exc:  # the VM or its agent went away
            if "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower():
                return ExecResult(TIMEOUT_EXIT_CODE, "", f"timed out after {timeout:g}s")
            return ExecResult(-1, "", f"lost the microVM {self.id}: {exc}")
        out = getattr(result, "stdout_bytes", None)
        err = getattr(result, "stderr_bytes", None)
        return ExecResult(
            int(result.exit_code),
            out.decode("utf-8", "replace") if isinstance(out, bytes) else result.stdout,
            err.decode("utf-8", "replace") if isinstance(err, bytes) else result.stderr,
        )

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        parent = os.path.dirname(path)
        if parent:
            await self.exec(["mkdir", "-p", parent])
        try:
            await asyncio.to_thread(self.machine.write_file, path, data, mode)
        except Exception as exc:
            raise SandboxError(f"cannot write {path} in microVM {self.id}: {exc}") from None

    async def get_file(self, path: str) -> bytes:
        try:
            return bytes(await asyncio.to_thread(self.machine.read_file, path))
        except Exception as exc:
            if getattr(exc, "code", "") == "NOT_FOUND" or "no such file" in str(exc).lower():
                raise FileNotFoundError(f"{path} does not exist in microVM {self.id}") from None
            raise SandboxError(f"cannot read {path} in microVM {self.id}: {exc}") from None

    async def expose(self, port: int) -> str:
        published = await asyncio.to_thread(self.machine.publish, port)
        return f"http://127.0.0.1:{published.host}"

    async def terminate(self) -> None:
        self.gone = True
        try:
            await asyncio.to_thread(self.machine.delete)
        except Exception as exc:
            if "not found" not in str(exc).lower():
                raise SandboxError(f"cannot delete microVM {self.id}: {exc}") from None

    async def start_docker(self) -> None:
        raise SandboxUnsupported(
            f"microVM {self.id} has no working Docker daemon; set image in {CONFIG_TABLE} "
            f"to a guest image with Docker (default {DEFAULT_IMAGE})"
        )

    async def build_image(self, context: str, tag: str, *, labels: dict[str, str]) -> str:
        """Build on the host, hand the image over as a ``docker save`` archive, load it."""
        if self.mode != "vm":
            return await super().build_image(context, tag, labels=labels)
        await self.ensure_docker()
        ref, archive = await asyncio.to_thread(self.provider.host_build, context, tag, labels)
        remote = f"/tmp/agentenv-image-{secrets.token_hex(4)}.tar"
        await self.put_file(remote, archive)
        loaded = await self.exec(f"docker load -q -i {remote}; c=$?; rm -f {remote}; exit $c",
                                 timeout=900)
        if loaded.exit_code != 0:
            raise SandboxError(f"loading {ref} into microVM {self.id} failed: "
                               f"{loaded.stderr.strip()[-500:]}")
        return ref


class SmolVmSandboxProvider(SandboxProvider):
    """Local microVMs (``[sandbox.providers.smol_vm.config]``)."""

    name: ClassVar[str] = "smol_vm"
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")

    def __init__(self, *, image: str = DEFAULT_IMAGE, cpus: int | None = None,
                 memory_mb: int | None = None, sdk: Any = None) -> None:
        """``sdk`` replaces the ``smol`` module (tests give it a fake ``Machine``)."""
        self.image = image
        self.cpus = cpus
        self.memory_mb = memory_mb
        self._sdk = sdk

    @classmethod
    def from_config(
        cls, *, image: str = DEFAULT_IMAGE, cpus: int | None = None, memory_mb: int | None = None
    ) -> SmolVmSandboxProvider:
        """The table's settings (the guest image, default CPUs and memory of each microVM);
        the kernel refuses any other key, naming these."""
        return cls(image=image, cpus=cpus, memory_mb=memory_mb)

    @classmethod
    def availability(cls) -> str | None:
        """A real probe boot, once per process (``/dev/kvm`` existing proves nothing)."""
        return _cached_availability()

    @property
    def sdk(self) -> Any:
        if self._sdk is None:
            import smol

            prepare_environment()
            self._sdk = smol
        return self._sdk

    def exec_options(self, **options: Any) -> Any:
        return self.sdk.ExecOptions(**options)

    def host_build(self, context: str, tag: str, labels: dict[str, str]) -> tuple[str, bytes]:
        """Build on the host engine (hermetic, content-hash tag); ``docker save`` it."""
        import docker

        ref, tar, all_labels = hermetic_context(context, tag, labels)
        client = docker.from_env(timeout=600)
        existing = None
        try:
            existing = client.images.get(ref)
        except docker.errors.ImageNotFound:
            pass
        want = all_labels.get("agentenv.build_digest")
        if existing is None or (existing.labels or {}).get("agentenv.build_digest") != want:
            client.images.build(fileobj=_bytes_io(tar), custom_context=True, tag=ref,
                                labels=all_labels, rm=True, pull=False)
            existing = client.images.get(ref)
        check_platform(ref, existing.attrs.get("Architecture", ""))
        return ref, b"".join(existing.save(named=True))

    async def create(self, spec: SandboxSpec) -> SmolVmSandbox:
        self.check_spec(spec)
        sdk = self.sdk
        image = self.image if spec.mode == "vm" else (spec.image or self.image)
        resources = sdk.ResourceSpec(
            cpus=int(spec.cpu) if spec.cpu else self.cpus,
            memory_mb=spec.memory_mb or self.memory_mb, network=True,
        )
        config = sdk.MachineConfig(
            name=f"agentenv-{secrets.token_hex(6)}", image=image,
            labels={**spec.labels, **ownership_labels(spec.ttl_seconds), MODE_LABEL: spec.mode},
            resources=resources,
            env=dict(spec.env_vars) or None, ttl_seconds=spec.ttl_seconds,
            ports=[sdk.PortSpec(host=0, guest=p) for p in spec.ports] or None,
            persistent=True,
        )
        try:
            machine = await asyncio.to_thread(sdk.Machine.create, config)
        except Exception as exc:
            raise SandboxError(f"the microVM for {spec.name} did not start: {exc}") from None
        return SmolVmSandbox(self, machine, spec.mode)

    async def attach(self, sandbox_id: str) -> SmolVmSandbox | None:
        try:
            machine = await asyncio.to_thread(self.sdk.Machine.connect, sandbox_id)
        except Exception:
            return None
        labels = (machine.info() or {}).get("labels") or {}
        return SmolVmSandbox(self, machine, labels.get(MODE_LABEL, "vm"))

    async def list_sandboxes(self, labels: dict[str, str]) -> list[Sandbox]:
        try:
            found = await asyncio.to_thread(self.sdk.Machine.list, None, labels)
        except Exception as exc:
            # The SDK lists through smol's cloud API; without a token there is nothing it can
            # list, which the contract allows (gc then relies on the sandboxes' TTL).
            if type(exc).__name__ == "InvalidConfigError":
                return []
            raise
        sandboxes: list[Sandbox] = []
        for summary in found:
            attached = await self.attach(summary.name)
            if attached is not None:
                sandboxes.append(attached)
        return sandboxes


def check_platform(ref: str, architecture: str) -> None:
    """On Apple Silicon the guest is arm64 and emulates nothing: refuse amd64 images."""
    if apple_silicon() and architecture and architecture not in ("arm64", "aarch64"):
        raise SandboxUnsupported(
            f"image {ref} is built for {architecture}, but smol_vm on Apple Silicon runs arm64 "
            "guests without amd64 emulation: build it for linux/arm64 "
            "(docker build --platform linux/arm64)"
        )


def _bytes_io(data: bytes) -> Any:
    import io

    return io.BytesIO(data)

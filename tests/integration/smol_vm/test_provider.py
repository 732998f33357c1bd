"""The smol_vm provider at the SDK boundary: the ``smol`` module's ``Machine`` is replaced.

The fake machine records what it was asked and answers as the SDK does (``ExecResult`` with
``stdout_bytes``, ``PublishedPort``); the real config classes (``MachineConfig``,
``ResourceSpec``, ``ExecOptions``, ``PortSpec``) are the SDK's own, so a wrong field fails.
No microVM boots here: this host's paravirtual KVM cannot run the guest kernel.
"""

from __future__ import annotations

import os
import re
import time
import types
from pathlib import Path
from typing import Any

import pytest
import smol

from agent_env.sandbox.base import SandboxSpec, SandboxUnsupported
from agentenv_smol_vm import provider as smol_provider
from agentenv_smol_vm.provider import SmolVmSandboxProvider, check_platform, probe_boot


class FakeMachine:
    """Stands in for ``smol.Machine``: class methods create/connect/list, instance calls."""

    made: list[FakeMachine] = []
    fail_boot: str | None = None

    def __init__(self, config: Any) -> None:
        self.config = config
        self.name = config.name
        self.calls: list[tuple[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.deleted = False

    @classmethod
    def create(cls, config: Any) -> FakeMachine:
        if cls.fail_boot:
            raise smol.SmolError("START_FAILED", cls.fail_boot)
        machine = cls(config)
        cls.made.append(machine)
        return machine

    @classmethod
    def connect(cls, name: str) -> FakeMachine:
        for machine in cls.made:
            if machine.name == name and not machine.deleted:
                return machine
        raise smol.SmolError("NOT_FOUND", f"machine {name} not found")

    @classmethod
    def list(cls, conn: Any, labels: dict[str, str]) -> list[Any]:
        return [types.SimpleNamespace(name=m.name) for m in cls.made if not m.deleted
                and all((m.config.labels or {}).get(k) == v for k, v in labels.items())]

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "labels": self.config.labels}

    def exec(self, argv: list[str], options: Any = None) -> Any:
        self.calls.append(("exec", (argv, options)))
        if self.deleted:
            raise smol.SmolError("NOT_FOUND", "machine is gone")
        if argv == ["true"]:
            return smol.ExecResult(exit_code=0, stdout="", stderr="")
        return smol.ExecResult(exit_code=3, stdout="out", stderr="err",
                               stdout_bytes=b"out\n", stderr_bytes=b"err\n")

    def write_file(self, path: str, data: bytes, mode: int | None = None) -> None:
        self.calls.append(("write_file", (path, mode)))
        self.files[path] = data

    def read_file(self, path: str) -> bytes:
        if path not in self.files:
            raise smol.SmolError("NOT_FOUND", f"{path}: not found")
        return self.files[path]

    def publish(self, guest: int) -> Any:
        self.calls.append(("publish", guest))
        return smol.PublishedPort(guest=guest, host=40000 + guest)

    def delete(self) -> None:
        if self.deleted:
            raise smol.SmolError("NOT_FOUND", "machine not found")
        self.deleted = True


@pytest.fixture
def fake_sdk() -> Any:
    FakeMachine.made = []
    FakeMachine.fail_boot = None
    return types.SimpleNamespace(
        Machine=FakeMachine, MachineConfig=smol.MachineConfig, ResourceSpec=smol.ResourceSpec,
        ExecOptions=smol.ExecOptions, PortSpec=smol.PortSpec,
    )


async def test_create_boots_one_vm_with_resources_labels_env_ttl_and_ports(fake_sdk: Any) -> None:
    provider = SmolVmSandboxProvider(sdk=fake_sdk)
    sandbox = await provider.create(SandboxSpec(
        name="env-echo", mode="vm", cpu=2, memory_mb=2048, ttl_seconds=600, ports=(8080,),
        env_vars={"A": "1"}, labels={"agentenv.run": "r1"},
    ))
    [machine] = FakeMachine.made
    config = machine.config
    assert config.image == "docker:27-dind"
    assert (config.resources.cpus, config.resources.memory_mb) == (2, 2048)
    labels = dict(config.labels)
    assert f"pid={os.getpid()} " in labels.pop("agentenv.owner")  # for agent-env gc
    assert int(labels.pop("agentenv.expires")) > time.time()
    from agent_env.sandbox.ownership import state_label

    assert labels.pop("agentenv.state") == state_label()  # which state root's gc judges it
    assert labels == {"agentenv.run": "r1", "agentenv.mode": "vm"}
    assert (config.env, config.ttl_seconds) == ({"A": "1"}, 600)
    assert [p.guest for p in config.ports] == [8080]
    assert sandbox.describe() == {"id": machine.name, "provider": "smol_vm", "mode": "vm"}

    result = await sandbox.exec("echo out", cwd="/work", env={"B": "2"}, timeout=5)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    argv, options = machine.calls[-1][1]
    assert argv == ["sh", "-c", "echo out"]
    assert (options.workdir, options.env, options.timeout) == ("/work", {"B": "2"}, 5)

    await sandbox.put_file("/app/x.bin", b"\x00\x01", mode=0o755)
    assert machine.calls[-1] == ("write_file", ("/app/x.bin", 0o755))
    assert await sandbox.get_file("/app/x.bin") == b"\x00\x01"
    with pytest.raises(FileNotFoundError):
        await sandbox.get_file("/app/missing")
    assert await sandbox.expose(8080) == "http://127.0.0.1:48080"

    found = await provider.attach(sandbox.id)
    assert found is not None and found.mode == "vm"
    assert [s.id for s in await provider.list_sandboxes({"agentenv.run": "r1"})] == [sandbox.id]
    await sandbox.terminate()
    await sandbox.terminate()  # idempotent
    assert (await sandbox.exec("true")).exit_code == -1
    assert await provider.attach(sandbox.id) is None


async def test_a_network_policy_is_refused_before_booting(fake_sdk: Any) -> None:
    provider = SmolVmSandboxProvider(sdk=fake_sdk)
    with pytest.raises(SandboxUnsupported, match=r"smol_vm.*deny-all"):
        await provider.create(SandboxSpec(name="p", network_policy="deny-all"))
    assert FakeMachine.made == []


def test_the_probe_boot_reports_a_guest_that_cannot_boot(fake_sdk: Any) -> None:
    assert probe_boot(FakeMachine, smol.MachineConfig) is None
    assert FakeMachine.made[0].deleted  # the probe VM is removed
    FakeMachine.fail_boot = "KVM_EXIT_INTERNAL_ERROR: emulation failure"
    reason = probe_boot(FakeMachine, smol.MachineConfig)
    assert reason is not None
    assert "probe microVM did not boot" in reason and "emulation failure" in reason
    assert "hardware virtualization" in reason


def test_hosts_without_usable_kvm_get_a_clear_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smol_provider.platform, "system", lambda: "Linux")
    monkeypatch.setattr(smol_provider.os.path, "exists", lambda path: False)
    assert "needs KVM: /dev/kvm does not exist" in (smol_provider.host_problem() or "")
    monkeypatch.setattr(smol_provider.platform, "system", lambda: "Windows")
    assert "needs Linux with KVM or Apple Silicon" in (smol_provider.host_problem() or "")


def test_apple_silicon_refuses_amd64_images_saying_arm64_is_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(smol_provider, "apple_silicon", lambda: True)
    with pytest.raises(SandboxUnsupported, match=r"amd64.*build it for linux/arm64"):
        check_platform("agentenv/echo:abc", "amd64")
    check_platform("agentenv/echo:abc", "arm64")
    monkeypatch.setattr(smol_provider, "apple_silicon", lambda: False)
    check_platform("agentenv/echo:abc", "amd64")


#: What a user reads after ``smol_vm: `` when the provider is unusable: each says what is missing
#: and, where there is one, what to do (one per branch of ``availability``).
UNAVAILABLE_REASONS = (
    r"smol_vm needs Linux with KVM or Apple Silicon macOS \(this is .+\)",
    r"smol_vm needs KVM: /dev/kvm (does not exist \(enable virtualization or use docker\)"
    r"|is not readable and writable by this user)",
    r"the smolmachines SDK is not installed \(pip install 'agentenv-framework\[smol\]'\)",
    r"a probe microVM did not boot \(\w+: [^\n]*\); this host's KVM cannot run the guest "
    r"\(a paravirtual or nested KVM often cannot\): use a host with hardware virtualization, "
    r"or the docker provider",
    r"the probe microVM booted but could not run a command: [^\n]*",
)


@pytest.mark.slow
def test_this_host_is_reported_unavailable_or_boots(state_root: Path) -> None:
    """The real probe (here it fails: paravirtual KVM). A fallback chain that cannot use smol_vm
    fails with the reason as its note: one line saying what is missing and what to do."""
    from agent_env.errors import UserError
    from agent_env.tasks.sandboxes import choose_provider

    reason = SmolVmSandboxProvider.availability()
    if reason is None:
        assert choose_provider(["smol_vm", "local"]) == "smol_vm"
        return
    assert any(re.fullmatch(shape, reason) for shape in UNAVAILABLE_REASONS), reason
    assert choose_provider(["smol_vm", "local"]) == "local"
    with pytest.raises(UserError) as refused:
        choose_provider(["smol_vm"])
    assert refused.value.message == "no sandbox provider of smol_vm is usable here"
    assert refused.value.notes == [f"smol_vm: {reason}"]


def test_the_plugin_is_listed_active() -> None:
    import subprocess
    import sys

    agent_env = str(Path(sys.executable).with_name("agent-env"))
    done = subprocess.run([agent_env, "plugin", "list"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("agentenv-framework-smol-vm ")]
    assert "1 sandbox provider" in line and line.rstrip().endswith("active")


def test_settings_are_checked_by_the_kernel_against_from_config() -> None:
    """An unknown key is the kernel's one-line error naming the known ones; ``sdk`` (a test
    hook of the constructor) is no setting."""
    from agent_env.api import ConfigError
    from agent_env.runtime import Runtime

    def provider_from(settings: dict[str, Any]) -> Any:
        runtime = Runtime()
        runtime.configure(sandbox={"providers": {"smol_vm": {"config": settings}}})
        return runtime.provider("smol_vm")

    with pytest.raises(ConfigError) as refused:
        provider_from({"image": "docker:27-dind", "cpu": 2})
    assert refused.value.message == (
        "[sandbox.providers.smol_vm.config] has unknown setting(s) cpu for the 'smol_vm' "
        "sandbox provider (known: cpus, image, memory_mb)"
    )
    with pytest.raises(ConfigError, match=r"unknown setting.*sdk"):
        provider_from({"sdk": "x"})
    provider = provider_from({"cpus": 2, "memory_mb": 1024})
    assert (provider.image, provider.cpus, provider.memory_mb) == ("docker:27-dind", 2, 1024)

"""A real microVM: boot, exec, copy, terminate. Runs only where a probe boot succeeds.

On these machines every boot fails (the guest kernel hits an instruction the paravirtual KVM
cannot emulate), so it skips with that declared capability and the probe's reason. The probe
runs in a fixture, not at import: it takes about 30 s, which collection must not pay.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import NoReturn

import pytest

from agent_env.sandbox.base import SandboxSpec
from agentenv_smol_vm.provider import SmolVmSandboxProvider


@pytest.fixture(scope="module")
def bootable_host(skip_or_fail: Callable[[str], NoReturn]) -> None:
    """Probe-boots once; a host that cannot boot microVMs is a capability skip, even under CI.

    A missing SDK is no host capability but an install gap (``pip install
    'agentenv-framework[smol]'``), so it fails under ``CI=true`` like a missing Docker.
    """
    if importlib.util.find_spec("smol") is None:
        skip_or_fail("the smolmachines SDK is not installed "
                     "(pip install 'agentenv-framework[smol]')")
    reason = SmolVmSandboxProvider.availability()
    if reason is not None:
        pytest.skip(f"capability: a KVM host that boots microVMs ({reason})")


@pytest.mark.slow
@pytest.mark.usefixtures("bootable_host")
async def test_a_real_microvm_runs_commands_and_copies_files() -> None:
    provider = SmolVmSandboxProvider(image="alpine:3.20")
    sandbox = await provider.create(SandboxSpec(name="real", mode="container",
                                                image="alpine:3.20"))
    try:
        result = await sandbox.exec("echo out; echo err >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        await sandbox.put_file("/tmp/x.txt", b"hello")
        assert await sandbox.get_file("/tmp/x.txt") == b"hello"
    finally:
        await sandbox.terminate()

"""A real microVM: boot, exec, copy, terminate. Runs only where a probe boot succeeds.

On these machines every boot fails (the guest kernel hits an instruction the paravirtual KVM
cannot emulate), so it skips with that declared capability and the probe's reason.
"""

from __future__ import annotations

import pytest

from agent_env.sandbox.base import SandboxSpec
from agentenv_smol_vm.provider import SmolVmSandboxProvider

REASON = SmolVmSandboxProvider.availability()


@pytest.mark.skipif(REASON is not None, reason=f"capability: a KVM host that boots microVMs "
                    f"({REASON})")
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

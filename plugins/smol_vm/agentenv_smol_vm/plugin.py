"""smol_vm's hook implementation: the ``smol_vm`` sandbox provider (cheap to import)."""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("smol_vm", "agentenv_smol_vm.provider:SmolVmSandboxProvider")]

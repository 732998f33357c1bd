"""smol_vm's hook implementation: the ``smol_vm`` sandbox provider (cheap to import)."""

from __future__ import annotations

from agent_env.api import hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[type]:
    from agentenv_smol_vm.provider import SmolVmSandboxProvider

    return [SmolVmSandboxProvider]

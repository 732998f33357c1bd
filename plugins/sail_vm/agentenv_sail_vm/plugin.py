"""Sail's hook implementation: the ``sail_vm`` sandbox provider (cheap to import)."""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("sail_vm", "agentenv_sail_vm.provider:SailSandboxProvider")]

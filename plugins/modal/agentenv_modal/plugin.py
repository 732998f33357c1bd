"""Modal's hook implementation: the ``modal`` and ``modal_vm`` sandbox providers (cheap to
import)."""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("modal", "agentenv_modal.provider:ModalSandboxProvider"),
            Lazy("modal_vm", "agentenv_modal.provider:ModalVmSandboxProvider")]

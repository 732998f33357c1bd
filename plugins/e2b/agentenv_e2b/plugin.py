"""e2b's hook implementation: the ``e2b`` sandbox provider (cheap to import)."""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("e2b", "agentenv_e2b.provider:E2BSandboxProvider")]

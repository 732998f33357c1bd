"""vercel's hook implementation: the ``vercel`` sandbox provider (cheap to import)."""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("vercel", "agentenv_vercel.provider:VercelSandboxProvider")]

"""tenki's hook implementation: the ``tenki`` sandbox provider (cheap to import)."""

from __future__ import annotations

from agent_env.api import hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[type]:
    from agentenv_tenki.provider import TenkiSandboxProvider

    return [TenkiSandboxProvider]

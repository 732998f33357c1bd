"""The builtin plugin that contributes the ``local`` sandbox provider (imported when used)."""

from __future__ import annotations

from agent_env.contributions import Lazy
from agent_env.hookspecs import hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("local", "agent_env.sandbox.local:LocalSandboxProvider")]

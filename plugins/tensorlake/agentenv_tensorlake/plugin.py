"""tensorlake's hook implementation: the ``tensorlake`` sandbox provider (cheap to import)."""

from __future__ import annotations

from agent_env.api import hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[type]:
    from agentenv_tensorlake.provider import TensorlakeSandboxProvider

    return [TensorlakeSandboxProvider]

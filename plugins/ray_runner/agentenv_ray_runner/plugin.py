"""The ray_runner plugin's hooks: the ``ray`` runner and the ``ray`` sandbox provider.

Cheap to import on purpose (the CLI imports every plugin at start): both are
:class:`Lazy` contributions, and ``ray`` is imported only when a run selects one.
"""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_runners() -> list[Lazy]:
    return [Lazy("ray", "agentenv_ray_runner.runner:RayRunner")]


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("ray", "agentenv_ray_runner.sandbox:RaySandboxProvider")]

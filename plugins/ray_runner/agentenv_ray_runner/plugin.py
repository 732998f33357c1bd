"""The ray_runner plugin's hook: the ``ray`` runner.

Cheap to import on purpose (the CLI imports every plugin at start): the runner is a
:class:`Lazy` contribution, and ``ray`` is imported only when a run selects it.
"""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_runners() -> list[Lazy]:
    return [Lazy("ray", "agentenv_ray_runner.runner:RayRunner")]

"""docker_env's hook implementations: the ``docker`` sandbox provider and two image stores.

Cheap to import on purpose (the CLI imports it at every start): the classes named here import
the ``docker`` SDK only inside their methods.
"""

from __future__ import annotations

from agent_env.contributions import StoreBackend
from agent_env.hookspecs import hookimpl


@hookimpl
def agent_env_sandbox_providers() -> list[type]:
    from agentenv_docker_env.sandbox import DockerSandboxProvider

    return [DockerSandboxProvider]


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    from agentenv_docker_env.stores import LocalImageStore, LocalRegistryImageStore

    return [
        StoreBackend("image", "local", LocalImageStore),
        StoreBackend("image", "local_registry", LocalRegistryImageStore),
    ]

"""docker_env's hook implementations: the ``docker`` sandbox provider, two image stores, its
``[plugins.agentenv-framework-docker-env]`` settings, and the ``task-container`` bundle.

Cheap to import on purpose (the CLI imports it at every start): the classes named here import
the ``docker`` SDK only inside their methods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_env.api import BundleSource, Lazy, StoreBackend, hookimpl

BUNDLES = Path(__file__).parent / "bundles"


@hookimpl
def agent_env_configure(settings: dict[str, Any]) -> None:
    """``build_timeout = <seconds>`` bounds every image build (see :mod:`.settings`)."""
    from agentenv_docker_env.settings import configure

    configure(settings)


@hookimpl
def agent_env_sandbox_providers() -> list[Lazy]:
    return [Lazy("docker", "agentenv_docker_env.sandbox:DockerSandboxProvider")]


@hookimpl
def agent_env_stores() -> list[StoreBackend]:
    return [
        StoreBackend("image", "local", Lazy("local", "agentenv_docker_env.stores:LocalImageStore")),
        StoreBackend("image", "local_registry",
                     Lazy("local_registry", "agentenv_docker_env.stores:LocalRegistryImageStore")),
    ]


@hookimpl
def agent_env_bundles() -> list[BundleSource]:
    """``task-container``: a task that runs a container of its own (run_docker_container)."""
    return [BundleSource("task-container", BUNDLES / "task-container")]

"""The ``docker`` provider (docker_env) against the provider conformance suite, on a real daemon.

Never skipped under ``CI=true``: a missing daemon or base image fails there instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent_env.sandbox.base import SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance

pytestmark = pytest.mark.docker

BASE_IMAGE = "python:3.11-slim"


class TestDockerProvider(ProviderConformance):
    MODES = ("vm", "container")
    IMAGE = BASE_IMAGE

    @pytest.fixture
    def provider(self, run_label: str, docker_client: Any) -> Iterator[SandboxProvider]:
        from agentenv_docker_env.sandbox import DockerSandboxProvider

        client = docker_client
        yield DockerSandboxProvider()
        label = {"label": f"agentenv.run={run_label}"}
        for container in client.containers.list(all=True, filters=label):
            container.remove(force=True)
        for network in client.networks.list(filters=label):
            network.remove()

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        from agentenv_docker_env.sandbox import DockerSandboxProvider

        return DockerSandboxProvider()

"""The ``docker`` provider (docker_env) against the provider conformance suite, on a real daemon.

Never skipped under ``CI=true``: a missing daemon or base image fails there instead.
"""

from __future__ import annotations

import pytest

from agent_env.sandbox.base import SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance

pytestmark = pytest.mark.docker

BASE_IMAGE = "python:3.11-slim"


class TestDockerProvider(ProviderConformance):
    MODES = ("vm", "container")
    IMAGE = BASE_IMAGE

    @pytest.fixture
    def run_label(self, run_id: str) -> str:
        """The shared ``run_id``: whatever still carries it after the test is removed."""
        return run_id

    @pytest.fixture
    def provider(self, run_label: str) -> SandboxProvider:
        """Asks for ``run_label`` so Docker is checked first and leftovers go after ``made``."""
        from agentenv_docker_env.sandbox import DockerSandboxProvider

        return DockerSandboxProvider()

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        from agentenv_docker_env.sandbox import DockerSandboxProvider

        return DockerSandboxProvider()

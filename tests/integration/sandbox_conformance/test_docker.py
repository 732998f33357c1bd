"""The ``docker`` provider (docker_env) against the provider conformance suite, on a real daemon.

Never skipped under ``CI=true``: a missing daemon or base image fails there instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from agent_env.sandbox.base import SandboxProvider
from agent_env.testing.provider_conformance import ProviderConformance

pytestmark = pytest.mark.docker

BASE_IMAGE = "python:3.11-slim"


def docker_or_skip() -> Any:
    """The engine client with the base image present; else skip (fail under CI)."""
    try:
        from agentenv_docker_env.engine import daemon_problem, docker_client
    except ImportError as exc:
        problem: str | None = f"docker_env is not installed: {exc}"
    else:
        problem = daemon_problem()
    if problem is None:
        client = docker_client()
        try:
            client.images.get(BASE_IMAGE)
        except Exception:
            problem = f"no {BASE_IMAGE} image (run `bash .ci/docker.sh` to build it offline)"
        else:
            return client
    message = f"no usable Docker: {problem} (run `bash .ci/docker.sh`)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message}; Docker tests never skip under CI=true")
    pytest.skip(message)


class TestDockerProvider(ProviderConformance):
    MODES = ("vm", "container")
    IMAGE = BASE_IMAGE

    @pytest.fixture
    def provider(self, run_label: str) -> Iterator[SandboxProvider]:
        from agentenv_docker_env.sandbox import DockerSandboxProvider

        client = docker_or_skip()
        yield DockerSandboxProvider()
        label = {"label": f"agentenv.run={run_label}"}
        for container in client.containers.list(all=True, filters=label):
            container.remove(force=True)
        for network in client.networks.list(filters=label):
            network.remove()

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        from agentenv_docker_env.sandbox import DockerSandboxProvider

        return DockerSandboxProvider()

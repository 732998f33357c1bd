"""End-to-end: ``agent-env run`` as a subprocess, as a user runs it, on the real Docker daemon."""

from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """The engine client; skips with the reason when Docker is missing (fails under CI=true)."""
    try:
        from agentenv_docker_env.engine import daemon_problem, docker_client
    except ImportError as exc:
        problem: str | None = f"docker_env is not installed: {exc}"
    else:
        problem = daemon_problem()
    if problem is None:
        client = docker_client()
        try:
            client.images.get("python:3.11-slim")
            return client
        except Exception:
            problem = "no python:3.11-slim image"
    message = f"no usable Docker: {problem} (run `bash .ci/docker.sh`)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message}; Docker tests never skip under CI=true")
    pytest.skip(message)

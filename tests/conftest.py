"""Fixtures every test tier shares.

``docker_client`` is the one gate for Docker tests: a real daemon with the ``python:3.11-slim``
base image, else a skip with the reason — and a failure under ``CI=true``, where Docker tests
never skip. ``state_root`` gives a test its own state root (stores, caches, providers).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BASE_IMAGE = "python:3.11-slim"


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """The engine client with the base image present; skips (fails under CI) otherwise."""
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


@pytest.fixture
def state_root(tmp_path: Path) -> Iterator[Path]:
    """A private state root for this test; config, stores and providers are forgotten around it."""
    from agent_env import runtime

    root = tmp_path / "state"
    old = os.environ.get("AGENT_ENV_STATE_DIR")
    os.environ["AGENT_ENV_STATE_DIR"] = str(root)
    runtime.reset()
    yield root
    if old is None:
        os.environ.pop("AGENT_ENV_STATE_DIR", None)
    else:
        os.environ["AGENT_ENV_STATE_DIR"] = old
    runtime.reset()

"""mcp_env's Docker tier: a real daemon or a skip with the reason (a failure under ``CI=true``).

Each test gets its own state root (so stored envs and caches never touch the user's) and a
unique ``agentenv.run`` label whose leftovers are removed, and reported, after the test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def docker_or_skip() -> Any:
    """The engine client with ``python:3.11-slim`` present; else skip (fail under CI)."""
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
        except Exception:
            problem = "no python:3.11-slim image (run `bash .ci/docker.sh` to build it offline)"
        else:
            return client
    message = f"no usable Docker: {problem} (run `bash .ci/docker.sh`)"
    if in_ci():
        pytest.fail(f"{message}; Docker tests never skip under CI=true")
    pytest.skip(message)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    return docker_or_skip()


@pytest.fixture(autouse=True)
def state_root(tmp_path: Path, docker_client: Any) -> Iterator[Path]:
    from agent_env import config
    from agent_env.stores import reset_stores
    from agent_env.tasks.sandboxes import forget_providers

    root = tmp_path / "state"
    old = os.environ.get("AGENT_ENV_STATE_DIR")
    os.environ["AGENT_ENV_STATE_DIR"] = str(root)
    config.reset()
    reset_stores()
    forget_providers()
    yield root
    if old is None:
        os.environ.pop("AGENT_ENV_STATE_DIR", None)
    else:
        os.environ["AGENT_ENV_STATE_DIR"] = old
    config.reset()
    reset_stores()
    forget_providers()


@pytest.fixture
def run_id(docker_client: Any) -> Iterator[str]:
    """A unique ``agentenv.run`` label; whatever still carries it afterwards is removed."""
    value = f"test-mcp-{uuid.uuid4().hex[:10]}"
    yield value
    label = {"label": f"agentenv.run={value}"}
    for container in docker_client.containers.list(all=True, filters=label):
        container.remove(force=True)
    for network in docker_client.networks.list(filters=label):
        network.remove()


@pytest.fixture
def leftovers(docker_client: Any, run_id: str) -> Callable[[], list[str]]:
    """Names of the containers and networks still labelled with the test's ``run_id``."""

    def names() -> list[str]:
        label = {"label": f"agentenv.run={run_id}"}
        return ([c.name for c in docker_client.containers.list(all=True, filters=label)]
                + [n.name for n in docker_client.networks.list(filters=label)])

    return names

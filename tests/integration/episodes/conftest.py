"""Episode tests: Docker ones need a real daemon (a skip with the reason, a failure under CI).

Each test gets its own state root. Whatever an episode spec brings up carries the label
``agentenv.episodes=<spec id>``; :func:`leftovers` lists what still does, and anything left
after a test is removed (the test has already failed on it by then).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_env.episodes.episode import SPEC_LABEL

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "episodes"


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
            problem = "no python:3.11-slim image"
        else:
            return client
    message = f"no usable Docker: {problem} (run `bash .ci/docker.sh`)"
    if in_ci():
        pytest.fail(f"{message}; Docker tests never skip under CI=true")
    pytest.skip(message)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    return docker_or_skip()


@pytest.fixture
def state_root(tmp_path: Path) -> Iterator[Path]:
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
def leftovers(docker_client: Any) -> Iterator[Callable[[str], list[str]]]:
    """``leftovers(spec_id)``: names of containers and networks still labelled with it."""
    asked: set[str] = set()

    def names(spec_id: str) -> list[str]:
        asked.add(spec_id)
        label = {"label": f"{SPEC_LABEL}={spec_id}"}
        return ([c.name for c in docker_client.containers.list(all=True, filters=label)]
                + [n.name for n in docker_client.networks.list(filters=label)])

    yield names
    for spec_id in asked:
        label = {"label": f"{SPEC_LABEL}={spec_id}"}
        for container in docker_client.containers.list(all=True, filters=label):
            container.remove(force=True)
        for network in docker_client.networks.list(filters=label):
            network.remove()

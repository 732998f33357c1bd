"""Docker-tier fixtures: a real daemon or a skip with the reason (a failure under ``CI=true``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _state_root(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Iterator[None]:
    """Keep wheel caches and registry data out of the user's state folder."""
    from agent_env import runtime

    root = tmp_path_factory.getbasetemp() / "agentenv-state"
    old = os.environ.get("AGENT_ENV_STATE_DIR")
    os.environ["AGENT_ENV_STATE_DIR"] = str(root)
    runtime.reset()
    yield
    if old is None:
        os.environ.pop("AGENT_ENV_STATE_DIR", None)
    else:
        os.environ["AGENT_ENV_STATE_DIR"] = old
    runtime.reset()


@pytest.fixture
def run_id(docker_client: Any) -> Iterator[str]:
    """A unique ``agentenv.run`` label; whatever carries it is removed after the test."""
    value = f"test-{uuid.uuid4().hex[:10]}"
    yield value
    label = {"label": f"agentenv.run={value}"}
    for container in docker_client.containers.list(all=True, filters=label):
        container.remove(force=True)
    for network in docker_client.networks.list(filters=label):
        network.remove()


@pytest.fixture
def image_names(docker_client: Any) -> Iterator[list[str]]:
    """Collects image tags a test made, and removes them afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        try:
            docker_client.images.remove(name, force=True)
        except Exception:
            pass

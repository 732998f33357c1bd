"""mcp_env's Docker tier: a real daemon or a skip with the reason (a failure under ``CI=true``).

Each test gets its own state root (so stored envs and caches never touch the user's) and a
unique ``agentenv.run`` label whose leftovers are removed, and reported, after the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _private_state(state_root: Path, docker_client: Any) -> Path:
    """Every test here gets its own state root and needs Docker (a module may override it)."""
    return state_root


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

"""Episode tests: Docker ones need a real daemon (a skip with the reason, a failure under CI).

Each test gets its own state root. Whatever an episode spec brings up carries the label
``agentenv.episodes=<spec id>``; :func:`leftovers` lists what still does, and anything left
after a test is removed (the test has already failed on it by then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_env.episodes.episode import SPEC_LABEL

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "episodes"


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

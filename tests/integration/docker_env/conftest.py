"""Docker-tier fixtures: a real daemon or a skip with the reason (a failure under ``CI=true``).

``run_id`` (a label whose leftovers are removed) comes from ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path, docker_client: Any) -> Path:
    """Every test needs Docker and its own state root (wheel caches, registry data)."""
    return build_state_root


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

"""Fixtures for the e2b plugin: the fake E2B (API and envd, in threads) on real Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_e2b import BASE_IMAGE, DOCKER_TEMPLATE, FakeE2B


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path) -> Path:
    """A private state root and config per test (stores, wheel caches, providers)."""
    return build_state_root


@pytest.fixture
def fake_e2b(wildcard_localhost: None, docker_client: Any) -> Iterator[FakeE2B]:
    """The fake service on 127.0.0.1, each part served from its own thread."""
    fake = FakeE2B(docker_client, templates={DOCKER_TEMPLATE: BASE_IMAGE})
    fake.start()
    yield fake
    fake.stop()


"""Fixtures for the tensorlake plugin: the fake Tensorlake API (in a thread) on real Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_tensorlake import API_KEY, BASE_IMAGE, FakeTensorlake


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path) -> Path:
    """A private state root and config per test (stores, wheel caches, providers)."""
    return build_state_root


@pytest.fixture
def fake_tensorlake(wildcard_localhost: None, docker_client: Any) -> Iterator[FakeTensorlake]:
    """The fake service on 127.0.0.1, served from its own thread and event loop."""
    fake = FakeTensorlake(
        docker_client, api_key=API_KEY,
        images={"agentenv-dind-host-v1": BASE_IMAGE, BASE_IMAGE: BASE_IMAGE,
                "plain-python": BASE_IMAGE},
    )
    fake.start()
    yield fake
    fake.stop()

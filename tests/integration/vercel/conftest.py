"""Fixtures for the vercel plugin: the fake Vercel Sandbox API (in a thread) on real Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_vercel import BASE_IMAGE, FakeVercel


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path) -> Path:
    """A private state root and config per test (stores, wheel caches, providers)."""
    return build_state_root


@pytest.fixture
def fake_vercel(wildcard_localhost: None, docker_client: Any) -> Iterator[FakeVercel]:
    """The fake service on 127.0.0.1, served from its own thread and event loop."""
    fake = FakeVercel(docker_client, images={"agentenv-docker": BASE_IMAGE})
    fake.start()
    yield fake
    fake.stop()

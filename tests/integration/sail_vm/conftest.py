"""Fixtures for the sail_vm plugin: the fake Sail (in a thread) on real Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_sail import FakeSail, fake_env


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path) -> Path:
    """A private state root and config per test (stores, wheel caches, providers)."""
    return build_state_root


@pytest.fixture
def fake_sail(docker_client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSail]:
    """The fake service on 127.0.0.1, served from its own thread and event loop; the SDK's
    endpoint settings point at it for the test (and its process-wide client is rebuilt)."""
    import sail

    fake = FakeSail(docker_client)
    fake.start()
    for name, value in fake_env(fake).items():
        monkeypatch.setenv(name, value)
    sail.reset_transports()
    yield fake
    fake.stop()
    sail.reset_transports()

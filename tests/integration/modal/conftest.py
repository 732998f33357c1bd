"""Fixtures for the modal plugin: the fake Modal (two gRPC services, in a thread) on real
Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_modal import FakeModal, fake_env


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path) -> Path:
    """A private state root and config per test (stores, wheel caches, providers)."""
    return build_state_root


@pytest.fixture
def fake_modal(wildcard_localhost: None, docker_client: Any,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModal]:
    """The fake service on 127.0.0.1, served from its own thread and event loop; the SDK's
    settings (``MODAL_SERVER_URL``, tokens) point at it for the test."""
    fake = FakeModal(docker_client)
    fake.start()
    for name, value in fake_env(fake).items():
        monkeypatch.setenv(name, value)
    yield fake
    fake.stop()
    # a method the fake does not serve would have been an error the provider swallowed
    assert fake.unimplemented == [], fake.unimplemented

"""Fixtures for the tenki plugin: the real SDK on a fake Tenki transport backed by Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_tenki import FakeTenkiRPC


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path) -> Path:
    """A private state root and config per test (stores, wheel caches, providers)."""
    return build_state_root


@pytest.fixture
def fake_tenki(monkeypatch: pytest.MonkeyPatch, docker_client: Any) -> Iterator[FakeTenkiRPC]:
    """The fake service; the SDK's data-plane transport is the same fake."""
    import tenki_sandbox.sandbox

    fake = FakeTenkiRPC(docker_client)
    monkeypatch.setattr(tenki_sandbox.sandbox, "GrpcDataPlaneRPC",
                        lambda endpoint, credentials: fake)
    yield fake
    fake.remove_all()

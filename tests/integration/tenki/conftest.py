"""Fixtures for the tenki plugin: the real SDK on a fake Tenki transport backed by Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the fake lives next to the tests

from fake_tenki import FakeTenkiRPC


@pytest.fixture(autouse=True)
def _private_state(state_root: Path) -> Path:
    """A private state root and config per test (stores, wheel caches, providers)."""
    return state_root


@pytest.fixture
def fake_tenki(monkeypatch: pytest.MonkeyPatch, docker_client: Any) -> Iterator[FakeTenkiRPC]:
    """The fake service; the SDK's data-plane transport is the same fake."""
    import tenki_sandbox.sandbox

    fake = FakeTenkiRPC(docker_client)
    monkeypatch.setattr(tenki_sandbox.sandbox, "GrpcDataPlaneRPC",
                        lambda endpoint, credentials: fake)
    yield fake
    fake.remove_all()

"""The provider conformance suite's own fixtures: a private state root per test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path) -> Path:
    """Keep wheel caches and sandbox folders out of the user's state folder."""
    return build_state_root

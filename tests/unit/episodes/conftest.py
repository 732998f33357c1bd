"""Episode unit tests: no Docker; every test gets its own state root and config."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_state(state_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared ``state_root``, with no config file or model endpoint from outside the test."""
    monkeypatch.delenv("AGENT_ENV_CONFIG", raising=False)
    monkeypatch.delenv("AGENT_ENV_MODEL_BASE_URL", raising=False)
    monkeypatch.chdir(state_root.parent)
    return state_root

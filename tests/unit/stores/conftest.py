"""Hermetic store tests: every test gets its own state root and config, no outside plugins."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_state(state_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared ``state_root``, with no config file or store chosen from outside the test."""
    monkeypatch.delenv("AGENT_ENV_CONFIG", raising=False)
    monkeypatch.chdir(state_root.parent)
    for variable in (
        "AGENT_ENV_DOCUMENT_STORE",
        "AGENT_ENV_OBJECT_STORE",
        "AGENT_ENV_SECRET_STORE",
    ):
        monkeypatch.delenv(variable, raising=False)
    return state_root

"""Hermetic store tests: every test gets its own state root and config, no outside plugins."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_env import runtime


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "state"
    monkeypatch.setenv("AGENT_ENV_STATE_DIR", str(root))
    monkeypatch.delenv("AGENT_ENV_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    for variable in (
        "AGENT_ENV_DOCUMENT_STORE",
        "AGENT_ENV_OBJECT_STORE",
        "AGENT_ENV_SECRET_STORE",
    ):
        monkeypatch.delenv(variable, raising=False)
    runtime.reset()
    yield root
    runtime.reset()

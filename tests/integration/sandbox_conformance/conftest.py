"""The provider conformance suite's own fixtures: a private state root per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _state_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep wheel caches and sandbox folders out of the user's state folder."""
    from agent_env import runtime

    root = tmp_path_factory.getbasetemp() / "agentenv-state"
    old = os.environ.get("AGENT_ENV_STATE_DIR")
    os.environ["AGENT_ENV_STATE_DIR"] = str(root)
    runtime.reset()
    yield
    if old is None:
        os.environ.pop("AGENT_ENV_STATE_DIR", None)
    else:
        os.environ["AGENT_ENV_STATE_DIR"] = old
    runtime.reset()

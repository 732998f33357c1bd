"""mcp_env's Docker tier: a real daemon or a skip with the reason (a failure under ``CI=true``).

Each test gets its own state root (so stored envs and caches never touch the user's) and a
unique ``agentenv.run`` label (``run_id`` and ``leftovers``, from ``tests/conftest.py``) whose
leftovers are removed after the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _private_state(build_state_root: Path, docker_client: Any) -> Path:
    """Every test here gets its own state root and needs Docker (a module may override it)."""
    return build_state_root

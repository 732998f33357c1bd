"""``agent-env run install-demo``: the model-agent installed into a task's own container
(install/v1) answers with the scripted model; the run scores the answer, the agent's process
inside the container and install/v1 itself, then leaves nothing behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .test_conversation import agent_env

pytestmark = pytest.mark.docker


def test_the_install_demo_runs_offline(tmp_path: Path, left_by: Any) -> None:
    run = agent_env(tmp_path, "run", "install-demo")
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/install.json v1: passed (answer: 1, install_check: 1, inside: 1)" in out
    assert "agents/model-agent: installing into container 'workspace'" in out
    assert "'agent' ready in 'workspace'" in out
    assert left_by(out) == []

"""End-to-end: ``agent-env`` as a subprocess, with a temporary state root and working folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HELLO = Path(__file__).resolve().parents[2] / "core/agent_env/bundles/shipped/hello"


class AgentEnv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.env = {**os.environ, "AGENT_ENV_STATE_DIR": str(self.state), "NO_COLOR": "1"}
        self.env.pop("AGENT_ENV_CONFIG", None)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "agent_env", *args]

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), cwd=self.root, env=self.env, text=True,
                              capture_output=True, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), cwd=self.root, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture
def agent_env(tmp_path) -> AgentEnv:
    return AgentEnv(tmp_path)

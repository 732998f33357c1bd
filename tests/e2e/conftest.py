"""End-to-end: ``agent-env`` as a subprocess, with a temporary state root and working folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HELLO = Path(__file__).resolve().parents[2] / "core/agent_env/bundles/shipped/hello"


class AgentEnv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.env = {**os.environ, "AGENT_ENV_STATE_DIR": str(self.state), "NO_COLOR": "1"}
        # the user's config and model endpoint are not the test's: runs are offline
        for name in ("AGENT_ENV_CONFIG", "AGENT_ENV_MODEL_BASE_URL", "AGENT_ENV_MODEL_API_KEY"):
            self.env.pop(name, None)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "agent_env", *args]

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), cwd=self.root, env=self.env, text=True,
                              capture_output=True, timeout=timeout)

    def add_plugin(self, module: str, source: str) -> None:
        """Install ``source`` as an outside plugin (module ``module``, found by its entry
        point like any installed one) for this agent-env's commands."""
        import textwrap

        site = self.root / "site"
        dist = site / f"{module}-1.0.dist-info"
        dist.mkdir(parents=True, exist_ok=True)
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text(f"[agent_env]\n{module} = {module}\n")
        self.env["PYTHONPATH"] = str(site)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), cwd=self.root, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture
def agent_env(tmp_path) -> AgentEnv:
    return AgentEnv(tmp_path)


@pytest.fixture
def left_by(docker_client: Any) -> Callable[[str], list[str]]:
    """``left_by(output)``: containers, networks and volumes still labelled with the runs it
    names."""

    def find(output: str) -> list[str]:
        instances = re.findall(r"instance (\S+)", output)
        assert instances, output
        names = []
        for instance in instances:
            label = {"label": f"agentenv.run={instance}"}
            names += [c.name for c in docker_client.containers.list(all=True, filters=label)]
            names += [n.name for n in docker_client.networks.list(filters=label)]
            names += [v.name for v in docker_client.volumes.list(filters=label)]
        return names

    return find


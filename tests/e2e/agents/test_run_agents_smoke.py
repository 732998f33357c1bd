"""``agent-env run agents-smoke`` via the CLI: the model-agent answers through the echo env with
the scripted model, offline, and nothing is left behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def agent_env(state: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state)}
    for name in ("AGENT_ENV_CONFIG", "AGENT_ENV_MODEL_BASE_URL", "AGENT_ENV_MODEL_API_KEY"):
        env.pop(name, None)
    return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def test_agents_smoke_passes_with_the_scripted_model(tmp_path: Path, left_by: Any) -> None:
    run = agent_env(tmp_path, "run", "agents-smoke")
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/smoke.json v1: passed (answer: 1, echoes: 1)" in out
    # The model is named as the scripted one wherever it shows.
    assert re.search(r"agents/model-agent: 'agent' answered \(completed\) with model "
                     r"scripted:echo_script: 2 model call\(s\), \d+ input \+ \d+ output tokens, "
                     r"1 tool call\(s\)", out), out
    assert re.search(r"model-gateway: image agentenv/agentenv-model-gateway:[0-9a-f]{16}", out)
    assert re.search(r"agents/model-agent: image agentenv/model-agent:[0-9a-f]{16}", out)
    assert "Tore down 1 sandbox" in out
    assert left_by(out) == []

    # A rerun finds every image by its content hash.
    again = agent_env(tmp_path, "run", "agents-smoke")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "tasks/smoke.json v1: passed (answer: 1, echoes: 1)" in again.stdout
    for image in ("model-gateway: image agentenv/agentenv-model-gateway",
                  "agents/model-agent: image agentenv/model-agent", "envs/echo: image"):
        assert re.search(re.escape(image) + r".*\(cached\)$", again.stdout, re.MULTILINE), \
            again.stdout
    assert left_by(again.stdout) == []

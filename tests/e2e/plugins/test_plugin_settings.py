"""``[plugins.<distribution>]`` settings reach their plugin and change what it does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

AGENT_ENV = Path(sys.executable).with_name("agent-env")
IMAGE_LINE = "envs/echo: image agentenv/echo:"


def agent_env(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    full.update(AGENT_ENV_STATE_DIR=str(cwd / "state"), **env)
    return subprocess.run([str(AGENT_ENV), *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=600, check=False)


def write_config(folder: Path, text: str) -> None:
    (folder / ".agentenv").mkdir(exist_ok=True)
    (folder / ".agentenv" / "config.toml").write_text(text)


@pytest.mark.docker
def test_mcp_env_progress_setting_silences_its_image_lines(
    tmp_path: Path, docker_client: Any
) -> None:
    shown = agent_env(tmp_path, "run", "echo-mcp")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert IMAGE_LINE in shown.stdout
    write_config(tmp_path, "[plugins.agentenv-framework-mcp-env]\nprogress = false\n")
    quiet = agent_env(tmp_path, "run", "echo-mcp")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "tasks/smoke.json v1: passed (echoes: 1)" in quiet.stdout
    assert IMAGE_LINE not in quiet.stdout and "gateway: image" not in quiet.stdout


def test_an_unknown_plugin_table_fails_plugin_check(tmp_path: Path) -> None:
    write_config(tmp_path, "[plugins.agentenv-framework-dokcer-env]\nbuild_timeout = 5\n")
    checked = agent_env(tmp_path, "plugin", "check")
    assert checked.returncode == 1
    assert ("problem: [plugins.agentenv-framework-dokcer-env] names no installed plugin"
            in checked.stdout)
    ran = agent_env(tmp_path, "run", "hello")
    assert ran.returncode == 0, ran.stderr  # a stray table warns, it does not stop a run
    assert "warning: [plugins.agentenv-framework-dokcer-env] names no installed plugin" in (
        ran.stderr)


def test_tracing_shows_configure_and_every_run_event(tmp_path: Path) -> None:
    ran = agent_env(tmp_path, "run", "hello", AGENT_ENV_TRACE_PLUGINS="1")
    assert ran.returncode == 0, ran.stderr
    assert "[plugins]   agent_env_configure [hook]" in ran.stderr
    events = [line.split("kind='")[1].split("'")[0] for line in ran.stderr.splitlines()
              if "event: RunEvent(kind=" in line]
    assert events == ["run_started", *["step_started", "step_finished"] * 3, "run_finished"]

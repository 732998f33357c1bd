"""``agent-env up`` is contributed by the explorer plugin, and a busy port is a one-line error."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from agentenv_explorer.app import run_summary


def agent_env(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "agent_env", *args], cwd=tmp_path, env=env,
                          text=True, capture_output=True, timeout=60)


def test_up_is_listed_and_documents_its_options(tmp_path: Path) -> None:
    listed = agent_env(tmp_path, "--help")
    assert listed.returncode == 0 and "  up " in listed.stdout
    shown = agent_env(tmp_path, "up", "--help")
    assert "--port" in shown.stdout and "--host" in shown.stdout and "127.0.0.1" in shown.stdout


def test_a_busy_port_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = agent_env(tmp_path, "up", "--port", str(port))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: cannot listen on 127.0.0.1:{port}"), done.stderr
    assert "--port" in done.stderr and "Traceback" not in done.stderr


def test_the_references_explorer_table_sets_the_port(tmp_path: Path) -> None:
    """``[explorer] port`` (the reference's) is the port ``up`` takes when --port names none;
    its keys not read here are warned about with the reason."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / ".agentenv").mkdir()
        (tmp_path / ".agentenv" / "config.toml").write_text(
            f'[explorer]\nport = {port}\ncors_origins = ["https://x.example"]\n')
        done = agent_env(tmp_path, "up")
    assert done.returncode != 0
    assert f"Error: cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr
    assert "[explorer] cors_origins is not read: the explorer answers its own page only" in \
        done.stderr


def test_a_run_row_is_small_and_names_the_first_failure() -> None:
    row = run_summary({
        "_id": "t-1", "task_id": "t", "status": "completed", "outcome": "failed",
        "failures": [{"step_id": "check", "error_type": "StepError", "error": "no match"}],
        "completed_steps": ["box"], "context": {
            "agents": {"a": {"agent": "model-agent", "model": "gpt-x"}},
            "outputs": {"ask": {"trajectory": [{"type": "prompt", "text": "x" * 100_000}]}}},
    })
    assert row["instance_id"] == "t-1" and row["error"] == "StepError: no match"
    assert row["agents"] == ["model-agent"] and row["models"] == ["gpt-x"]
    assert row["completed_steps"] == 1 and row["failures"] == 1
    assert len(repr(row)) < 1000  # the transcript stays out of the list

"""Env types add their own commands under ``agent-env env``: ``mcp-server`` is mcp_env's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env["AGENT_ENV_STATE_DIR"] = str(tmp_path / "state")
    return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)


def test_mcp_server_commands_come_with_the_mcp_env_plugin(tmp_path: Path) -> None:
    listed = _cli(tmp_path, "env", "--help")
    assert listed.returncode == 0 and "mcp-server" in listed.stdout
    put = _cli(tmp_path, "env", "mcp-server", "put", "--id", "x", "--context",
               str(tmp_path / "missing"))
    assert put.returncode == 1 and put.stderr.strip().endswith("missing: not a folder")

    off = ("-p", "no:agentenv-framework-mcp-env")
    listed = _cli(tmp_path, *off, "env", "--help")
    assert listed.returncode == 0 and "mcp-server" not in listed.stdout
    assert "deploy" in listed.stdout  # the kernel's own env commands stay
    gone = _cli(tmp_path, *off, "env", "mcp-server", "put", "--id", "x")
    assert gone.returncode == 2 and "No such command 'mcp-server'" in gone.stderr

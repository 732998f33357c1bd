"""build_mcp_cli's program compiles for any command name it accepts, and preflight refuses a
name that is not one word before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent_env.api import PreflightView
from agentenv_mcp_env.mcp_cli import BuildMcpCli, cli_script


def test_the_program_runs_and_says_where_its_gateway_goes(tmp_path: Path) -> None:
    program = tmp_path / "bin" / "notes"
    program.parent.mkdir()
    program.write_text(cli_script("notes", 'my "notes"'))
    compile(program.read_text(), str(program), "exec")
    shown = subprocess.run([sys.executable, str(program), "--help"], capture_output=True,
                           text=True, timeout=30)
    assert shown.returncode == 0 and shown.stdout.startswith("notes: the tools of the my 'notes'")
    lost = subprocess.run([sys.executable, str(program), "list"], capture_output=True,
                          text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert lost.returncode != 0
    assert "no gateway: set AGENT_ENV_GATEWAY_URL" in lost.stderr
    # an unreachable gateway: exit 2 and one line
    down = subprocess.run([sys.executable, str(program), "list"], capture_output=True,
                          text=True, timeout=30,
                          env={"AGENT_ENV_GATEWAY_URL": "http://127.0.0.1:9/t/x"})
    assert down.returncode == 2 and down.stderr.startswith("notes: cannot reach the gateway")


def test_a_command_name_that_is_not_one_word_is_refused() -> None:
    view = PreflightView(step_ids=frozenset({"cli"}), entities={"envs": frozenset({"echo"})})
    assert BuildMcpCli(id="cli", env_id="echo", command_name="echoes").check(view) == []
    [problem] = BuildMcpCli(id="cli", env_id="echo", command_name="rm -rf").check(view)
    assert problem.startswith("command_name 'rm -rf' must be one word")
    [problem] = BuildMcpCli(id="cli", env_id="nope", command_name="x").check(view)
    assert problem == "env_id 'nope' names no env in this bundle"

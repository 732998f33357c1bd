"""Issue 31, class 18 (and 14): messages that named the wrong cause, through the CLI as a
subprocess (each starts ``agent-env`` or binds a socket, so they live in this tier)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def agent_env(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_env", *args], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("how", ["variable", "option"])
def test_a_config_path_that_is_not_a_file_says_what_it_is(tmp_path: Path, how: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state")}
    for target, says in ((tmp_path, "which is a folder"), (fifo, "not a regular file"),
                         (tmp_path / "none.toml", "which does not exist")):
        args = ["config", "show"]
        if how == "option":
            args = ["--config", str(target), *args]
            env.pop("AGENT_ENV_CONFIG", None)
        else:
            env["AGENT_ENV_CONFIG"] = str(target)
        done = agent_env(env, *args)
        named = "--config" if how == "option" else "AGENT_ENV_CONFIG"
        assert done.returncode != 0, done.stdout
        assert done.stderr.startswith(f"Error: {named} names {target}, "), done.stderr
        assert says in done.stderr


@pytest.mark.parametrize("where", ["/dev/null", "/proc/self"])
def test_a_state_root_in_a_kernel_filesystem_is_refused(where: str) -> None:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": where}
    env.pop("AGENT_ENV_CONFIG", None)
    done = agent_env(env, "artifact", "file", "list")
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: {where} is in /") and "remove it" not in done.stderr



def test_up_on_a_host_that_is_not_here_does_not_blame_the_port(tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state")}
    env.pop("AGENT_ENV_CONFIG", None)
    done = agent_env(env, "up", "--host", "evil.invalid", "--port", "0")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "it is not an address of this machine" in last
    assert "--port" not in last

"""Issue 21, classes 15 and 16: plugin arguments that do nothing or cannot work say so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def agent_env(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state")}
    env.pop("AGENT_ENV_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "agent_env", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


def test_p_no_with_a_name_that_matches_no_plugin_says_so(tmp_path: Path) -> None:
    typo = agent_env(tmp_path, "-p", "no:dockr_env", "plugin", "list")
    assert typo.returncode == 0
    assert ("warning: -p no:dockr-env matches no plugin, so nothing was turned off (plugins: "
            in typo.stderr), typo.stderr
    assert "docker_env" in typo.stderr.split("plugins: ", 1)[1]
    for name in ("docker_env", "agentenv-framework-docker-env"):  # its name or its dist's
        off = agent_env(tmp_path, "-p", f"no:{name}", "plugin", "list")
        assert "warning" not in off.stderr, off.stderr
        row = next(line for line in off.stdout.splitlines()
                   if line.startswith("agentenv-framework-docker-env"))
        assert "skipped (disabled)" in row


def test_agent_env_plugins_naming_no_plugin_says_so(tmp_path: Path, monkeypatch) -> None:
    """Found by this session's hostile pass: AGENT_ENV_PLUGINS=<typo> loaded no plugin at all,
    silently (a run then fails for a missing step type, far from the cause)."""
    monkeypatch.setenv("AGENT_ENV_PLUGINS", "agents,agnets")
    typo = agent_env(tmp_path, "plugin", "list")
    assert typo.returncode == 0
    assert ("warning: AGENT_ENV_PLUGINS names agnets, which matches no plugin, so it loads "
            "nothing (plugins: ") in typo.stderr, typo.stderr
    assert "agents" not in typo.stderr.split("names ", 1)[1].split(",")[0]  # only the typo
    row = next(line for line in typo.stdout.splitlines()
               if line.startswith("agentenv-framework-agents "))
    assert "active" in row


def test_plugin_add_refuses_specs_no_installer_could_install(tmp_path: Path) -> None:
    for spec, message in (("./no-such-plugin", "Error: no such file or folder: "
                                                "./no-such-plugin"),
                          ("dist/missing-1.0-py3-none-any.whl", "no such file or folder"),
                          ("", "Error: an empty plugin spec"),
                          ("  ", "Error: an empty plugin spec")):
        refused = agent_env(tmp_path, "plugin", "add", "--dry-run", spec)
        assert refused.returncode == 1 and message in refused.stderr, refused.stderr
        assert "Plan:" not in refused.stdout


def test_plugin_add_dry_run_shows_the_whole_installer_command(tmp_path: Path) -> None:
    plan = agent_env(tmp_path, "plugin", "add", "--dry-run", "docker_env")
    assert plan.returncode == 0, plan.stderr
    installer = next(line for line in plan.stdout.splitlines() if line.startswith("Installer:"))
    assert installer.endswith((" -m pip", "uv pip")), installer

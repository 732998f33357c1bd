"""``agent-env run --dry-run`` checks what a real run would need (a usable sandbox provider for
every chain its steps ask for, a model that someone answers) and reports every problem at once,
writing nothing; ``--eval`` is repeatable."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def run(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), **extra)
    return subprocess.run([str(AGENT_ENV), "run", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path, check=False)


def test_every_missing_need_is_listed_and_nothing_is_written(tmp_path: Path) -> None:
    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "b"
    shutil.copytree(BUNDLES / "agents-smoke", bundle, ignore=shutil.ignore_patterns("__pycache__"))
    task = bundle / "tasks" / "smoke.json"
    task.write_text(task.read_text().replace('"scripted:echo_script"', '"gpt-4o"'))
    done = run(tmp_path, str(bundle), "--dry-run", DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1] == ("Error: dry run: a real run would fail: 2 problems (listed above); "
                         "nothing was written or run")
    assert any(line.startswith("  tasks/smoke.json: step 'ask': model 'gpt-4o' goes to the "
                               "model upstream") for line in lines), done.stderr
    assert any(line.startswith("  tasks/smoke.json: step 'deploy': no sandbox provider of "
                               "docker is usable here; docker: cannot reach the Docker daemon")
               for line in lines), done.stderr
    assert done.stdout == ""  # no ledger line: nothing was stored


def test_a_dry_run_with_what_it_needs_passes(tmp_path: Path) -> None:
    done = run(tmp_path, "hello", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "Dry run: nothing was written or run." in done.stdout


def test_eval_is_repeatable(tmp_path: Path) -> None:
    done = run(tmp_path, "hello", "--eval", "first", "--eval", "second", "--dry-run")
    assert done.returncode == 1
    assert "--eval first: no such eval in this bundle" in done.stderr
    assert "--eval second: no such eval in this bundle" in done.stderr

"""``agent-env run echo-mcp``, ``mail-mcp`` and ``multi-mcp`` via the CLI: pass, rerun unchanged,
no leftovers."""

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
    env.pop("AGENT_ENV_CONFIG", None)
    return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def test_echo_mcp_passes_and_a_rerun_reuses_everything(
    tmp_path: Path, left_by: Any
) -> None:
    first = agent_env(tmp_path, "run", "echo-mcp")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "tasks/smoke.json v1: passed (echoes: 1)" in first.stdout
    assert "Tore down 1 sandbox." in first.stdout
    assert left_by(first.stdout) == []

    again = agent_env(tmp_path, "run", "echo-mcp")
    assert again.returncode == 0, again.stdout + again.stderr
    ledger = [line for line in again.stdout.splitlines() if line.startswith(
        ("artifacts/", "envs/", "tasks/")) and ": v" in line]
    assert ledger == ["artifacts/check_echo: v1, unchanged", "envs/echo: v1, unchanged",
                      "tasks/smoke.json: v1, unchanged"]
    assert "tasks/smoke.json v1: passed (echoes: 1)" in again.stdout
    # The images are found by their content hash, not rebuilt, and the output says so.
    under_task = r"^\[tasks/smoke.json\] "
    assert re.search(under_task + r"envs/echo: image agentenv/echo:[0-9a-f]{16} \(cached\)$",
                     again.stdout, re.MULTILINE), again.stdout
    assert re.search(
        under_task + r"gateway: image agentenv/agentenv-gateway:[0-9a-f]{16} \(cached\)$",
        again.stdout, re.MULTILINE), again.stdout
    assert "building image" not in again.stdout
    assert left_by(again.stdout) == []


def test_mail_mcp_finds_the_invoice(tmp_path: Path, left_by: Any) -> None:
    run = agent_env(tmp_path, "run", "mail-mcp")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tasks/smoke.json v1: passed (finds-the-invoice: 1)" in run.stdout
    assert left_by(run.stdout) == []


def test_multi_mcp_serves_two_services_as_one_env(tmp_path: Path, left_by: Any) -> None:
    """The multi env's children are stored with it (only the multi env is named by a step),
    and its verify script sees both services' tools, one reading the other; tasks/seeded.json
    seeds both from the monday universe."""
    run = agent_env(tmp_path, "run", "multi-mcp")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tasks/smoke.json v1: passed (office: 1)" in run.stdout
    # the universe seeded both servers through the one gateway, each from its own folder
    assert "tasks/seeded.json v1: passed (monday: 1)" in run.stdout
    assert "[tasks/seeded.json] [2/2] " in run.stdout
    for env in ("digest", "notes", "office"):
        assert f"envs/{env}: v1 (new)" in run.stdout, run.stdout
    assert left_by(run.stdout) == []


def test_a_bundle_written_for_the_reference_runs_unchanged(
    tmp_path: Path, left_by: Any
) -> None:
    """``sandbox_type: local`` as the reference's smoke.json says it: envs go to docker."""
    import shutil

    from agentenv_mcp_env.plugin import BUNDLES

    bundle = tmp_path / "echo-reference"
    shutil.copytree(BUNDLES / "echo-mcp", bundle)
    smoke = bundle / "tasks" / "smoke.json"
    smoke.write_text(smoke.read_text().replace('"sandbox_type": "docker"',
                                               '"sandbox_type": "local"'))
    run = agent_env(tmp_path / "state", "run", str(bundle))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tasks/smoke.json v1: passed (echoes: 1)" in run.stdout
    assert left_by(run.stdout) == []


def test_controls_demo_steers_its_env(tmp_path: Path, left_by: Any) -> None:
    """The env control steps on a real deployment: the frozen clock, the tool locked for one
    role, a time trigger that prompts the receptionist agent (who signs a visitor in), the tool
    failing on purpose and a review approved for the unattended run, each effect checked
    through the gateway by the bundle's verifier."""
    run = agent_env(tmp_path, "run", "controls-demo", "--auto-review", "approve")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "trigger 'first-visitor' prompted 'receptionist': answered" in run.stdout
    assert "tasks/controls.json v1: passed (controls: 1)" in run.stdout, run.stdout
    assert "1 trigger watcher" in run.stdout  # the watcher is stopped with the rest
    assert left_by(run.stdout) == []


def test_a_trigger_that_never_fires_fails_its_step_naming_it(tmp_path: Path,
                                                             left_by: Any) -> None:
    """``await_fired`` on a trigger due tomorrow fails at its timeout with the trigger and its
    status; an executor deployed without a role is refused before anything is registered."""
    import json
    import shutil

    from agentenv_mcp_env.plugin import BUNDLES

    bundle = tmp_path / "controls"
    shutil.copytree(BUNDLES / "controls-demo", bundle)
    task = bundle / "tasks" / "controls.json"
    steps = json.loads(task.read_text())
    morning = next(s for s in steps if s["id"] == "morning")
    morning["triggers"][0]["when"]["at"] = "2030-01-03T09:00:00+01:00"
    morning["await_timeout_seconds"] = 1
    task.write_text(json.dumps(steps))
    run = agent_env(tmp_path / "state", "run", str(bundle), "--auto-review", "approve")
    assert run.returncode == 1, run.stdout + run.stderr
    assert ("/controls/desk': triggers did not all fire within 1s; statuses "
            "{'first-visitor': 'armed'}") in run.stdout, run.stdout
    assert left_by(run.stdout) == []

    next(s for s in steps if s["id"] == "receptionist").pop("role")
    task.write_text(json.dumps(steps))
    run = agent_env(tmp_path / "state", "run", str(bundle), "--auto-review", "approve")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "executor agent 'receptionist' was deployed without a role" in run.stdout
    assert left_by(run.stdout) == []

"""``agent-env run --agent/--model``: checked before anything is written, recorded with the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def test_an_agent_nobody_ships_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env["AGENT_ENV_STATE_DIR"] = str(tmp_path / "state")
    done = subprocess.run([str(AGENT_ENV), "run", "agents-smoke", "--agent", "nosuch"],
                          capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error: no agent named 'nosuch' (installed: aider, claude-code, codex, gemini, "
        "mini-swe-agent, model-agent, nop, opencode, openhands, oracle, pi); none is stored "
        "under that id either (agent-env a2a-agent put --id nosuch --folder DIR stores one)")
    assert done.stdout == ""  # no ledger line: nothing was stored
    # looking for a stored agent of that name may open the store, but nothing is written to it
    database = tmp_path / "state" / "documents.sqlite3"
    if database.exists():
        import sqlite3

        with sqlite3.connect(database) as conn:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE "
                                                 "type = 'table'")]
            assert all(conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] == 0
                       for t in tables if not t.startswith("_"))


def _run(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), **extra)
    return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path)


def test_a_model_nobody_would_answer_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    done = _run(tmp_path, "run", "agents-smoke", "--model", "gpt-4o")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        "Error: --model: model 'gpt-4o' goes to the model upstream, and no upstream is "
        "configured: set [model] base_url (and api_key) in .agentenv/config.toml or "
        "AGENT_ENV_MODEL_BASE_URL, or use a model a plugin serves (scripted:<name>)")
    unknown = _run(tmp_path, "run", "agents-smoke", "--model", "nosuch:thing")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("Error: --model: model provider 'nosuch' is not known")
    # with an upstream configured, any name goes to it (an upstream's own colons included)
    dry = _run(tmp_path, "run", "agents-smoke", "--model", "llama3:8b", "--dry-run",
               AGENT_ENV_MODEL_BASE_URL="http://127.0.0.1:9/v1")
    assert dry.returncode == 0, dry.stderr


def test_a_prompt_steps_own_model_is_checked_too(tmp_path: Path) -> None:
    import shutil

    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "b"
    shutil.copytree(BUNDLES / "agents-smoke", bundle,
                    ignore=shutil.ignore_patterns("__pycache__"))
    task = bundle / "tasks" / "smoke.json"
    task.write_text(task.read_text().replace('"scripted:echo_script"', '"gpt-4o"'))
    done = _run(tmp_path, "run", str(bundle))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("Error: tasks/smoke.json: step 'ask': model 'gpt-4o' goes "
                                  "to the model upstream, and no upstream is configured")


def test_the_kernel_runs_without_the_agents_plugin(tmp_path: Path) -> None:
    """Agents are a plugin: turned off, hello still runs, its steps and command are gone, and
    an --agent nothing would deploy is one line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env["AGENT_ENV_STATE_DIR"] = str(tmp_path / "state")
    off = [str(AGENT_ENV), "-p", "no:agentenv-framework-agents"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*off, *args], capture_output=True, text=True, env=env,
                              timeout=120, cwd=tmp_path)

    hello = cli("run", "hello")
    assert hello.returncode == 0, hello.stderr
    assert "passed" in hello.stdout
    assert cli("a2a-agent", "list").returncode == 2  # no such command
    shown = cli("plugin", "show", "agentenv-framework")
    assert "deploy_env" in shown.stdout and "deploy_agent" not in shown.stdout
    unused = cli("run", "hello", "--agent", "model-agent")
    assert unused.returncode == 1
    assert unused.stderr.strip() == ("Error: --agent model-agent: no step of this run deploys "
                                     "an agent")


def test_task_run_takes_the_run_choices_as_the_reference_spells_them(tmp_path: Path) -> None:
    """``task run --a2a-agent-id``, ``--user-model``, ``--judge-model``: checked before the run
    (an agent no step deploys, a model nobody answers), one line each."""
    task = tmp_path / "t.json"
    task.write_text('[{"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", '
                    '"sandbox_type": "local"}]')
    assert _run(tmp_path, "task", "create", str(task), "--id", "@me/t").returncode == 0
    agent = _run(tmp_path, "task", "run", "--id", "@me/t", "--a2a-agent-id", "model-agent")
    assert agent.returncode == 1
    assert agent.stderr.strip() == ("Error: --agent model-agent: no step of this run deploys "
                                    "an agent")
    user = _run(tmp_path, "task", "run", "--id", "@me/t", "--user-model", "gpt-x")
    assert user.returncode == 1
    assert user.stderr.startswith("Error: --user-model: model 'gpt-x' goes to the model "
                                  "upstream, and no upstream is configured")
    judged = _run(tmp_path, "task", "run", "--id", "@me/t", "--judge-model", "scripted:j")
    assert judged.returncode == 0, judged.stderr  # a model a plugin serves; no rubric to use it
    # the reference's per-role sandbox options: each chain is checked before the run
    envs = _run(tmp_path, "task", "run", "--id", "@me/t", "--env-sandbox", "nosuch")
    assert envs.returncode == 1
    assert envs.stderr.startswith("Error: --env-sandbox: no sandbox provider of nosuch is "
                                  "usable here"), envs.stderr
    kept = _run(tmp_path, "task", "run", "--id", "@me/t", "--agent-sandbox", "local",
                "--no-trajectory-filter", "--output-dir", "out")
    assert kept.returncode == 0, kept.stderr
    (record,) = (tmp_path / "out").glob("*.json")
    metadata = json.loads(record.read_text())["context"]["metadata"]
    assert (metadata["agent_sandbox"], metadata["trajectory_filter"]) == ("local", False)

"""Issue 21, class 12: config values that used to reach the stores unchecked are one line
naming the fix: a reference loop, a state root that is a file or cannot be made, a store
folder that cannot be written, an invalid SQLite setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def agent_env(tmp_path: Path, config: str | None, *args: str,
              **environ: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), **environ}
    env.pop("AGENT_ENV_CONFIG", None)
    if config is not None:
        (tmp_path / "config.toml").write_text(config)
        env["AGENT_ENV_CONFIG"] = str(tmp_path / "config.toml")
    return subprocess.run([sys.executable, "-m", "agent_env", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("environ, chain", [
    ({"LOOP": "env:LOOP"}, "env:LOOP -> env:LOOP"),
    ({"LOOP": "env:A", "A": "env:B", "B": "env:A"}, "env:LOOP -> env:A -> env:B -> env:A"),
])
def test_a_reference_loop_is_named(tmp_path: Path, environ: dict[str, str],
                                   chain: str) -> None:
    line = one_line_error(agent_env(tmp_path, '[stores]\nobject = "env:LOOP"\n', "run",
                                    "hello", **environ))
    assert line == (f"Error: stores.object: the references {chain} never reach a value (a "
                    "loop, or more than 10); make one of them a plain value")


def test_a_reference_chain_that_ends_resolves(tmp_path: Path) -> None:
    ran = agent_env(tmp_path, '[stores]\nobject = "env:LOOP"\n', "run", "hello",
                    LOOP="env:A", A="filesystem")
    assert ran.returncode == 0, ran.stderr


def test_a_state_root_that_is_a_file_or_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    line = one_line_error(agent_env(tmp_path, None, "run", "hello",
                                    AGENT_ENV_STATE_DIR=str(blocker)))
    assert line == (f"Error: {blocker} is a file, not a folder; remove it, or set "
                    "AGENT_ENV_STATE_DIR ([state] root) elsewhere")
    line = one_line_error(agent_env(tmp_path, None, "run", "hello",
                                    AGENT_ENV_STATE_DIR=str(blocker / "state")))
    assert line.startswith(f"Error: cannot make the folder {blocker / 'state'}: Not a directory")


def test_a_store_folder_that_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    config = f'[stores.object]\nbackend = "filesystem"\npath = "{blocker}/objects"\n'
    line = one_line_error(agent_env(tmp_path, config, "run", "hello"))
    assert line == (f"Error: [stores.object]: the 'filesystem' object store cannot use "
                    f"{blocker}/objects: Not a directory; give it a writable folder")


def test_an_invalid_sqlite_setting(tmp_path: Path) -> None:
    config = '[stores.document]\nbackend = "sqlite"\nsynchronous = "sometimes"\n'
    line = one_line_error(agent_env(tmp_path, config, "run", "hello"))
    assert "synchronous must be OFF, NORMAL, FULL or EXTRA, not 'sometimes'" in line


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"),
                                   {"nested": [1.0, float("inf")]}])
def test_a_setting_that_is_not_a_finite_number_is_refused(value) -> None:
    """Issue 31, class 16: TOML reads ``inf``, ``nan`` and ``1e400`` (as inf); a plugin's
    ``build_timeout = 1e400`` used to be taken. Every settings table is checked alike."""
    import attrs as attrs_lib

    from agent_env.errors import ConfigError
    from agent_env.settings import build

    @attrs_lib.frozen
    class Settings:
        build_timeout: object = 1800.0

    with pytest.raises(ConfigError, match=r"\[plugins.x\] build_timeout = .*give a finite"):
        build(Settings, {"build_timeout": value}, where="[plugins.x]", what="x")
    assert build(Settings, {"build_timeout": 1e300}, where="[plugins.x]", what="x")


def test_a_utf8_byte_order_mark_is_read_past_in_every_toml_file(tmp_path: Path) -> None:
    """Issue 31, class 18: a BOM (as some editors save) made TOML files fail with "Empty key"
    while JSON files took it; every TOML file is now read through one reader."""
    from agent_env.bundles.model import local_id_root
    from agent_env.bundles.parse import parse_bundle
    from agent_env.config import read_toml
    from agent_env.evals.entity import read_eval_file
    from agentenv_agents.definitions import read_agent

    bom = "\ufeff"
    config = tmp_path / "config.toml"
    config.write_text(bom + '[sandbox]\ndefault = "local"\n', encoding="utf-8")
    assert read_toml(config) == {"sandbox": {"default": "local"}}
    bundle = tmp_path / "b"
    (bundle / "envs" / "e").mkdir(parents=True)
    (bundle / "envs" / "e" / "env.toml").write_text(bom + 'environment_name = "e"\n'
                                                   'image = "x:1"\n', encoding="utf-8")
    parsed, problems = parse_bundle(bundle, local_id_root(bundle))
    assert problems == [] and parsed.envs[0].environment_name == "e"
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.toml").write_text(bom + 'type = "a2a"\nimage = "x:1"\n', encoding="utf-8")
    assert read_agent("a", agent).image == "x:1"
    evals = tmp_path / "e.toml"
    evals.write_text(bom + 'tasks = ["t1"]\n', encoding="utf-8")
    assert [t.task_id for t in read_eval_file(evals).tasks] == ["t1"]

"""``agent-env`` as a user runs it: a subprocess, with toy plugins on its path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def agent_env(*args: str, cwd: Path, extra_path: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    full_env["AGENT_ENV_STATE_DIR"] = str(cwd / "state")
    if extra_path is not None:
        full_env["PYTHONPATH"] = str(extra_path)
        # only the toys load: installed plugins must not change what these tests count
        full_env["AGENT_ENV_PLUGINS"] = ",".join(p.stem for p in extra_path.glob("*.py"))
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agent_env", *args],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=60,
    )


def make_dist(site: Path, dist: str, source: str, requires: tuple[str, ...] = ()) -> None:
    module = dist.replace("-", "_")
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{module}-1.0.dist-info"
    info.mkdir(parents=True)
    meta = [f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    (info / "entry_points.txt").write_text(f"[agent_env]\n{module} = {module}\n")


GOOD = """
print("noise while importing")
from agent_env.hookspecs import hookimpl

class Shout:
    type = "shout"

@hookimpl
def agent_env_step_types():
    return [Shout]
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    return folder


def test_version(tmp_path: Path) -> None:
    done = agent_env("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("agent-env ")


def test_plugin_list_json_shows_the_core_and_a_toy_plugin(tmp_path: Path, site: Path) -> None:
    make_dist(site, "toy-shout", GOOD)
    done = agent_env("plugin", "list", "--json", cwd=tmp_path, extra_path=site)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)  # the toy's print went to stderr, not into the JSON
    assert payload["format_version"] == 1
    rows = {r["package"]: r for r in payload["plugins"]}
    assert rows["agentenv-framework"]["builtin"] is True
    assert rows["agentenv-framework"]["status"] == "active"
    assert rows["toy-shout"]["status"] == "active"
    assert {(p["kind"], p["name"]) for p in rows["toy-shout"]["provides"]} == {
        ("step_type", "shout")
    }
    assert "noise while importing" in done.stderr


def test_a_broken_plugin_is_listed_and_check_fails_but_the_cli_works(
    tmp_path: Path, site: Path
) -> None:
    make_dist(site, "toy-broken", "import not_a_module_anywhere")
    make_dist(site, "toy-future", GOOD, requires=("agentenv-framework>=99",))
    listing = agent_env("plugin", "list", cwd=tmp_path, extra_path=site)
    assert listing.returncode == 0
    assert "toy-broken" in listing.stdout and "failed (import-error)" in listing.stdout
    assert "failed (incompatible-core)" in listing.stdout
    check = agent_env("plugin", "check", cwd=tmp_path, extra_path=site)
    assert check.returncode == 1
    assert "ModuleNotFoundError" in check.stdout
    assert check.stderr.strip().splitlines()[-1].startswith("Error: 2 plugin problem(s)")
    assert agent_env("--version", cwd=tmp_path, extra_path=site).returncode == 0


def test_check_passes_and_counts(tmp_path: Path, site: Path) -> None:
    make_dist(site, "toy-shout", GOOD)
    done = agent_env("plugin", "check", cwd=tmp_path, extra_path=site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok: 2 plugin package(s), ")
    assert done.stdout.rstrip().endswith("contribution(s), all in effect")


def test_p_no_turns_a_plugin_off(tmp_path: Path, site: Path) -> None:
    make_dist(site, "toy-shout", GOOD)
    done = agent_env("-p", "no:toy-shout", "plugin", "show", "toy-shout", "--json",
                     cwd=tmp_path, extra_path=site)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "skipped"


def test_plugin_show_unknown_is_a_one_line_error(tmp_path: Path) -> None:
    done = agent_env("plugin", "show", "nosuch", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: no plugin package named 'nosuch' (installed: ")
    assert "Traceback" not in done.stderr


def test_malformed_config_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / ".agentenv").mkdir()
    (tmp_path / ".agentenv" / "config.toml").write_text("[stores]\nobject = \n")
    done = agent_env("config", "show", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: ") and "config.toml:2: invalid TOML" in lines[0]


def test_config_show_masks_secrets_and_names_sources(tmp_path: Path) -> None:
    (tmp_path / ".agentenv").mkdir()
    (tmp_path / ".agentenv" / "config.toml").write_text(
        '[model]\nbase_url = "http://127.0.0.1:1"\napi_key = "sk-very-secret"\n'
        '[stores]\nobjekt = "x"\n'
    )
    done = agent_env("config", "show", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["values"]["model"]["api_key"] == "****"
    assert "sk-very-secret" not in done.stdout
    assert payload["sources"]["model"].startswith("file ")
    assert "unknown key 'objekt' in [stores]" in done.stderr


def test_agent_env_config_pointing_nowhere(tmp_path: Path) -> None:
    done = agent_env("config", "show", cwd=tmp_path,
                     env={"AGENT_ENV_CONFIG": str(tmp_path / "missing.toml")})
    assert done.returncode == 1
    assert "AGENT_ENV_CONFIG names" in done.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert agent_env("no-such-command", cwd=tmp_path).returncode == 2


def test_plugin_add_refuses_the_core(tmp_path: Path) -> None:
    done = agent_env("plugin", "add", "agentenv-framework", "-y", cwd=tmp_path)
    assert done.returncode == 1
    assert "is agent-env itself" in done.stderr


def test_plugin_remove_refuses_the_core(tmp_path: Path) -> None:
    done = agent_env("plugin", "remove", "agentenv-framework", "-y", cwd=tmp_path)
    assert done.returncode == 1
    assert "cannot be removed" in done.stderr


def test_config_explain_shows_value_reference_and_source(tmp_path: Path) -> None:
    (tmp_path / ".agentenv").mkdir()
    (tmp_path / ".agentenv" / "config.toml").write_text(
        '[model]\nbase_url = "env:MODEL_URL?http://127.0.0.1:1"\napi_key = "env:MODEL_KEY"\n'
    )
    env = {"MODEL_URL": "http://127.0.0.1:9", "MODEL_KEY": "sk-hidden"}
    done = agent_env("config", "explain", "model.base_url", "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["value"] == "http://127.0.0.1:9"
    assert payload["written"] == "env:MODEL_URL?http://127.0.0.1:1"
    assert payload["source"].startswith("file ")
    key = agent_env("config", "explain", "model.api_key", cwd=tmp_path, env=env)
    assert "sk-hidden" not in key.stdout and "****" in key.stdout
    missing = agent_env("config", "explain", "model.nope", cwd=tmp_path, env=env)
    assert missing.returncode == 1
    assert missing.stderr.startswith("Error: config has no 'model.nope'")

"""``plugin add`` / ``plugin remove`` against real fresh virtualenvs and a real toy wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")

pytestmark = pytest.mark.slow


def run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(kwargs.pop("env", {}))
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, **kwargs)


def build_toy_wheel(tmp: Path, *, broken: bool = False) -> Path:
    project = tmp / ("toy-broken" if broken else "toy-step")
    package = project / "toy_step"
    package.mkdir(parents=True)
    name = "agentenv-toy-broken" if broken else "agentenv-toy-step"
    (project / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"
        [project]
        name = "{name}"
        version = "0.3.0"
        dependencies = ["agentenv-framework>=0.1"]
        [project.entry-points.agent_env]
        toy_step = "toy_step"
        [tool.hatch.build.targets.wheel]
        packages = ["toy_step"]
    """))
    body = "raise ImportError('toy is broken on purpose')\n" if broken else textwrap.dedent("""
        from agent_env.hookspecs import hookimpl

        class Wave:
            type = "wave"

        @hookimpl
        def agent_env_step_types():
            return [Wave]
    """)
    (package / "__init__.py").write_text(body)
    done = run(UV, "build", "--wheel", "--out-dir", str(tmp / "dist"), str(project))
    assert done.returncode == 0, done.stderr
    return next((tmp / "dist").glob(f"{name.replace('-', '_')}-0.3.0-*.whl"))


@pytest.fixture(scope="module")
def uv_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh uv-made venv with the core and protocol from this checkout (uv owns it)."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    assert run(UV, "venv", "-q", "--python", sys.executable, str(venv)).returncode == 0
    done = run(UV, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
               "-e", str(ROOT / "protocol"), "-e", str(ROOT))
    assert done.returncode == 0, done.stderr
    return venv


def agent_env(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = f"{Path(UV).parent}:{os.environ.get('PATH', '')}"  # uv owns this venv
    return run(str(venv / "bin" / "agent-env"), *args, cwd=cwd,
               env={"AGENT_ENV_STATE_DIR": str(cwd / "state"), "PATH": path})


def packages(venv: Path, cwd: Path) -> dict[str, dict]:
    done = agent_env(venv, "plugin", "list", "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return {row["package"]: row for row in json.loads(done.stdout)["plugins"]}


def freeze(venv: Path) -> str:
    return run(UV, "pip", "freeze", "--python", str(venv / "bin" / "python")).stdout


def test_add_then_remove_a_toy_plugin(uv_venv: Path, tmp_path: Path) -> None:
    wheel = build_toy_wheel(tmp_path)
    dry = agent_env(uv_venv, "plugin", "add", str(wheel), "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0 and "Dry run: nothing changed." in dry.stdout
    assert "agentenv-toy-step" not in packages(uv_venv, tmp_path)

    added = agent_env(uv_venv, "plugin", "add", str(wheel), "-y", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert "Added agentenv-toy-step 0.3.0." in added.stdout
    row = packages(uv_venv, tmp_path)["agentenv-toy-step"]
    assert row["status"] == "active"
    assert [p["name"] for p in row["provides"]] == ["wave"]

    removed = agent_env(uv_venv, "plugin", "remove", "agentenv-toy-step", "-y", cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert "agentenv-toy-step" not in packages(uv_venv, tmp_path)


def test_a_plugin_that_does_not_load_is_rolled_back_exactly(
    uv_venv: Path, tmp_path: Path
) -> None:
    wheel = build_toy_wheel(tmp_path, broken=True)
    before = freeze(uv_venv)
    done = agent_env(uv_venv, "plugin", "add", str(wheel), "-y", cwd=tmp_path)
    assert done.returncode == 1
    assert "did not load, so the environment was restored" in done.stderr
    assert "toy is broken on purpose" in done.stderr
    assert freeze(uv_venv) == before

    # the reference's --keep keeps it, saying it does not take effect; --installer pip and
    # --index-url go to the installer (pip, reading the local index folder)
    index = tmp_path / "index"
    index.mkdir()
    kept = agent_env(uv_venv, "plugin", "add", "--installer", "uv-tool", "--index-url",
                     index.as_uri(), "--keep", "-y", str(wheel), cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert "--index-url " + index.as_uri() in kept.stderr  # the command as it ran
    assert "warning: kept, but it does not take effect: agentenv-toy-broken: failed" in \
        kept.stderr
    assert packages(uv_venv, tmp_path)["agentenv-toy-broken"]["status"] == "failed"
    assert agent_env(uv_venv, "plugin", "remove", "agentenv-toy-broken", "-y",
                     cwd=tmp_path).returncode == 0
    assert freeze(uv_venv) == before
    pipx = agent_env(uv_venv, "plugin", "add", "--installer", "pipx", "-y", str(wheel),
                     cwd=tmp_path)
    assert pipx.returncode == 1 and "pipx installs applications into environments of " \
        "their own" in pipx.stderr


def test_the_readme_example_plugin_installs_and_runs_its_bundle(
    uv_venv: Path, tmp_path: Path
) -> None:
    example = ROOT / "examples" / "plugins" / "write-file"
    added = agent_env(uv_venv, "plugin", "add", str(example), "-y", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    try:
        row = packages(uv_venv, tmp_path)["agentenv-write-file"]
        assert row["status"] == "active"
        assert {(p["kind"], p["name"]) for p in row["provides"]} == {
            ("step_type", "write_file"), ("bundle", "write-file-demo")
        }
        ran = agent_env(uv_venv, "run", "write-file-demo", cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "tasks/demo.json v1: passed (check: 1)" in ran.stdout
        # the stored task now uses write_file: removing the plugin is blocked, naming it
        blocked = agent_env(uv_venv, "plugin", "remove", "agentenv-write-file", "-y", cwd=tmp_path)
        assert blocked.returncode == 1
        assert "uses step type 'write_file'" in blocked.stderr
        assert "--force" in blocked.stderr
    finally:
        agent_env(uv_venv, "plugin", "remove", "agentenv-write-file", "-y", "--force",
                  cwd=tmp_path)
    assert "agentenv-write-file" not in packages(uv_venv, tmp_path)

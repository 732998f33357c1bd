"""A plugin written for the reference framework (``[agent_env.task_steps]`` entry points to
``TaskStep`` subclasses built on its SDK) loads unchanged: ``plugin list`` lists it and its step
types, preflight runs its own checks, a bundle's tasks run its steps and score what they
record; a broken one is listed as failed with its reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

AGENT_ENV = Path(sys.executable).with_name("agent-env")
HERE = Path(__file__).parent


def install(site: Path, name: str, version: str, entry_points: str) -> None:
    """A distribution as pip leaves it: its dist-info (METADATA, entry_points.txt), needing the
    reference's release, as such plugins declare."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   "Requires-Dist: agentenv-framework>=0.9\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_a_reference_style_step_plugin_loads_checks_and_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(HERE / "reference_style" / "refstyle_steps.py", site)
    install(site, "refstyle-steps", "1.2",
            "[agent_env.task_steps]\ncount_words = refstyle_steps:CountWordsTaskStep\n")
    install(site, "broken-steps", "0.1",
            "[agent_env.task_steps]\nnope = no_such_module:Step\n")
    bundle = tmp_path / "words"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "tasks" / "count.json").write_text(json.dumps([
        {"id": "count", "type": "count_words", "text": "one two three",
         "expected_words": 3, "version": None}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(site))

    def agent_env(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True,
                              env=env, timeout=120, cwd=tmp_path, check=False)

    listed = json.loads(agent_env("plugin", "list", "--json").stdout)
    rows = {row["package"]: row for row in listed["plugins"]}
    assert rows["refstyle-steps"]["status"] == "active"
    assert [p["name"] for p in rows["refstyle-steps"]["provides"]] == ["count_words"]
    assert rows["broken-steps"]["status"] == "failed"
    assert "No module named 'no_such_module'" in rows["broken-steps"]["detail"]
    assert all(f["package"] not in ("refstyle-steps", "broken-steps")
               for f in listed["foreign"])
    checked = agent_env("plugin", "check", "--json")  # as the reference spells it
    assert checked.returncode == 1
    report = json.loads(checked.stdout)
    assert report["ok"] is False
    assert report["problems"] == ["broken-steps: import-error: ModuleNotFoundError: No module "
                                  "named 'no_such_module'"]

    ran = agent_env("run", str(bundle))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "tasks/count.json v1: passed (count: 1)" in ran.stdout
    instance = ran.stdout.split("instance ")[-1].split()[0]
    record = json.loads(agent_env("task", "get-instance", instance).stdout)
    assert record["context"]["outputs"]["count"] == {"metadata": {"counted_words": 3}}

    (bundle / "tasks" / "count.json").write_text(json.dumps([
        {"id": "count", "type": "count_words", "text": "one", "expected_words": -1},
        {"id": "again", "type": "count_words", "text": "two", "colour": "red"},
        {"id": "third", "type": "count_words", "text": "three"}]))
    checked = agent_env("run", str(bundle), "--dry-run")
    assert checked.returncode == 1
    assert "count_words 'count': expected_words must be >= 0" in checked.stderr
    assert "step 'again': key 'colour' is not known to 'count_words'" in checked.stderr
    assert "step 'third': expected_words: required field missing" in checked.stderr


def test_step_classes_named_in_the_config_run_without_a_package(tmp_path: Path) -> None:
    """``[task_steps] impls``, as the reference reads it: a class on the path, no entry point;
    one that does not import is one line naming it and the section."""
    shutil.copy(HERE / "reference_style" / "refstyle_steps.py", tmp_path)
    config = tmp_path / "config.toml"
    config.write_text('[task_steps]\nimpls = ["refstyle_steps:CountWordsTaskStep"]\n')
    bundle = tmp_path / "words"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "tasks" / "count.json").write_text(json.dumps([
        {"id": "count", "type": "count_words", "text": "one two", "expected_words": 2}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(tmp_path),
               AGENT_ENV_CONFIG=str(config))

    def agent_env(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True,
                              env=env, timeout=120, cwd=tmp_path, check=False)

    ran = agent_env("run", str(bundle))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "tasks/count.json v1: passed (count: 1)" in ran.stdout

    config.write_text('[task_steps]\nimpls = ["refstyle_steps:Nope"]\n')
    broken = agent_env("run", str(bundle))
    assert broken.returncode != 0
    assert broken.stderr.strip().splitlines()[-1] == (
        "Error: [task_steps] impls: \"refstyle_steps:Nope\" cannot be imported (module "
        "'refstyle_steps' has no attribute 'Nope')")

"""A distribution written for the reference framework (its ``agent_env.*`` entry-point groups,
no ``agent_env`` one): its step types (see ``test_reference_plugins.py``) and its bundles load;
for its other groups ``plugin list`` shows it as ``foreign`` with what it would need, instead of
leaving it invisible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def test_a_reference_plugin_is_listed_as_foreign(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "ref_bundles-2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ref-bundles\nVersion: 2.0\n")
    (info / "entry_points.txt").write_text(
        "[agent_env.envs]\nshop = ref_bundles.envs:ShopEnv\n\n"
        "[agent_env.task_steps]\nclick = ref_bundles.x\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(site))

    def plugin_list(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENT_ENV), "plugin", "list", *args], capture_output=True,
                              text=True, env=env, timeout=60, cwd=tmp_path, check=False)

    shown = plugin_list()
    assert shown.returncode == 0, shown.stderr
    (line,) = [row for row in shown.stdout.splitlines()
               if row.startswith("ref-bundles") and "foreign" in row]
    assert "agent_env.envs (shop)" in line and "task_steps" not in line
    assert line.endswith("foreign (not loaded)")
    assert "needs an 'agent_env' entry point" in shown.stdout
    payload = json.loads(plugin_list("--json").stdout)
    assert payload["foreign"] == [{
        "package": "ref-bundles", "version": "2.0", "status": "foreign",
        "groups": {"agent_env.envs": ["shop"]},
        "needs": payload["foreign"][0]["needs"]}]
    # its step types are a plugin of their own, which fails here: ref_bundles.x is not there
    (steps,) = [p for p in payload["plugins"] if p["package"] == "ref-bundles"]
    assert steps["status"] == "failed" and "ref_bundles" in steps["detail"]


def test_a_reference_distributions_bundles_load_and_run(tmp_path: Path) -> None:
    """``[agent_env.bundles] shop = ref_shop``: the bundle folder ``ref_shop/shop/``, found
    without importing the package, listed by ``agent-env run`` and run by name."""
    import shutil

    site = tmp_path / "site"
    package = site / "ref_shop"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    shutil.copytree(Path(__file__).parents[3] / "core/agent_env/bundles/shipped/hello",
                    package / "shop")
    info = site / "ref_shop-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ref-shop\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[agent_env.bundles]\nshop = ref_shop\n"
                                           "missing = ref_shop\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(site))

    def agent_env(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                              timeout=120, cwd=tmp_path, check=False)

    payload = json.loads(agent_env("plugin", "list", "--json").stdout)
    (row,) = [p for p in payload["plugins"] if p["package"] == "ref-shop"]
    # one entry names a folder the package does not have: the plugin says so, loads nothing
    assert row["status"] == "failed" and "its bundle missing has no folder" in row["detail"]
    (info / "entry_points.txt").write_text("[agent_env.bundles]\nshop = ref_shop\n")
    payload = json.loads(agent_env("plugin", "list", "--json").stdout)
    (row,) = [p for p in payload["plugins"] if p["package"] == "ref-shop"]
    assert row["status"] == "active"
    assert [(p["kind"], p["name"]) for p in row["provides"]] == [("bundle", "shop")]
    assert payload["foreign"] == []
    listed = agent_env("run")
    assert "shop" in listed.stdout, listed.stdout
    ran = agent_env("run", "shop")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "passed (hello: 1)" in ran.stdout
    assert "@local/ref-shop/shop/" in ran.stdout  # ids rooted at the distribution

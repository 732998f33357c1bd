"""``website`` and ``computer_driver`` envs in a bundle: what their env.toml gets wrong is named
at preflight, before anything is written or built (the deploys: tests/e2e/agents/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_env.bundles.parse import parse_bundle
from agent_env.bundles.plan import PreflightFailed, plan_bundle

DRIVER = '''from agentenv_protocol.computer import (ComputerDriverEnvironment, Display, Image,
    capture, click, computer_driver, display, drag, press, scroll, type_text)
import Xlib  # not installed here: read with a stub


@computer_driver(name="pc", supports=[{"os": {"type": "linux"}, "arch": ["amd64"]}])
class Pc(ComputerDriverEnvironment):
    @display
    def a(self): return Display(1, 1)
    @capture
    def b(self): return Image(1, 1, b"", "png")
    @click
    def c(self, *args): pass
    @drag
    def d(self, *args): pass
    @scroll
    def e(self, *args): pass
    @type_text
    def f(self, *args): pass
    @press
    def g(self, *args): pass
'''


def plan(tmp_path: Path, env_toml: str, files: dict[str, str]) -> list[str]:
    folder = tmp_path / "b"
    env = folder / "envs" / "e"
    env.mkdir(parents=True)
    (env / "env.toml").write_text(env_toml)
    for name, text in files.items():
        (env / name).parent.mkdir(parents=True, exist_ok=True)
        (env / name).write_text(text)
    (folder / "tasks").mkdir()
    (folder / "tasks" / "t.json").write_text(json.dumps(
        [{"id": "deploy", "type": "deploy_env", "env_id": "e"}]))
    parsed, found = parse_bundle(folder, "@local/b")
    try:
        plan_bundle(parsed, parse_problems=found)
    except PreflightFailed as failed:
        return list(failed.problems)
    return []


def test_a_website_names_what_it_lacks(tmp_path: Path, state_root: Any) -> None:
    assert plan(tmp_path, 'type = "website"\nbackend_image = ""\ncolour = 1\n'
                          'env_provider_type = "modal"\n', {"frontend/Dockerfile": "FROM x\n"}) == [
        "envs/e/env.toml: unknown key(s) colour (a website env takes: backend_image, "
        "frontend_image, env_provider_type, network_policy, environment_name, id, type)",
        "envs/e/env.toml: env_provider_type 'modal': a website deploys through the gateway "
        "here ('gateway')",
        "envs/e/env.toml: backend_image must be an image reference"]
    assert plan(tmp_path / "2", 'type = "website"\n', {"Dockerfile.frontend": "FROM x\n"}) == [
        "envs/e: no backend to build: give backend_image in env.toml, a backend/ folder with a "
        "Dockerfile, or Dockerfile.backend"]
    assert plan(tmp_path / "3", 'type = "website"\n', {"Dockerfile.frontend": "FROM x\n",
                                                       "Dockerfile.backend": "FROM x\n"}) == []


@pytest.mark.parametrize(("module", "problem"), [
    (None, 'module is required: the driver\'s file and class, such as "driver.py:MyDriver"'),
    ('"gone.py:Pc"', "module 'gone.py:Pc' names no \"<file>:<class>\" of this folder; it has "
                     "driver.py, env.toml"),
    ('"driver.py:Other"', "driver.py:Other cannot be read: ValueError: driver.py has no "
                          "ComputerDriverEnvironment subclass named Other"),
    ('"driver.py:Pc"', None),
])
def test_a_computer_driver_is_read_at_preflight(tmp_path: Path, state_root: Any,
                                                module: str | None, problem: str | None) -> None:
    toml = 'type = "computer_driver"\n' + (f"module = {module}\n" if module else "")
    found = plan(tmp_path, toml, {"driver.py": DRIVER})
    assert found == ([f"envs/e/env.toml: {problem}"] if problem else [])

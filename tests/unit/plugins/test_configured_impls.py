"""``[envs] impls`` and ``[task_steps] impls``: classes a config names, registered beside the
plugins' (the e2e tier runs a reference-style step named this way)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import agent_env
from agent_env.errors import ConfigError
from agent_env.runtime import current

MODULE = '''
from agent_env.env_types import EnvType
from agent_env.tasks.steps import Step


class NotesEnv(EnvType):
    name = "notes"


class Wave(Step):
    type = "wave"


class Plain:
    name = "plain"
'''
REFERENCE_STYLE = "from agent_env.env.env import Env\n\nclass MailEnv(Env):\n    type = 'mail'\n"


@pytest.fixture
def team_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state_root: Any) -> str:
    (tmp_path / "team_impls.py").write_text(MODULE)
    (tmp_path / "team_reference.py").write_text(REFERENCE_STYLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "team_impls"
    for name in ("team_impls", "team_reference"):
        sys.modules.pop(name, None)


def test_named_classes_join_the_registries(team_module: str) -> None:
    agent_env.configure(envs={"impls": [f"{team_module}:NotesEnv"]},
                        task_steps={"impls": [f"{team_module}:Wave"]})
    host = current().host
    assert host.registry("env_type")["notes"].__name__ == "NotesEnv"
    assert host.registry("step_type")["wave"].__name__ == "Wave"


@pytest.mark.parametrize(("section", "impl", "message"), [
    ("envs", "team_impls:Plain", '[envs] impls: "team_impls:Plain" is not an env type'),
    ("envs", "team_impls", '[envs] impls: "team_impls" is not a \'module:Class\' string'),
    ("envs", "team_reference:MailEnv",
     "No module named 'agent_env.env'); it is written against the reference framework's own "
     "modules"),
    ("task_steps", "team_impls:NotesEnv",
     '[task_steps] impls: "team_impls:NotesEnv" is not a step class'),
])
def test_a_class_that_cannot_be_one_names_it_and_the_section(
        team_module: str, section: str, impl: str, message: str) -> None:
    agent_env.configure(**{section: {"impls": [impl]}})
    kind = "env_type" if section == "envs" else "step_type"
    with pytest.raises(ConfigError) as caught:
        current().host.registry(kind)
    assert message in str(caught.value)

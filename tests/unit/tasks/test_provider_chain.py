"""Which sandbox providers a step tries: the run's per-role choice, then ``--sandbox``, then the
step's own, then the config (``[sandbox] agent_default`` for agents)."""

from __future__ import annotations

from typing import Any

import agent_env
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.steps import RunChoices


def context() -> TaskContext:
    return TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())


def test_the_config_picks_agents_apart_from_envs(state_root: Any) -> None:
    agent_env.configure(sandbox={"default": "docker", "agent_default": "tenki,docker"})
    ctx = context()
    assert ctx.provider_chain(None, role="agent") == ["tenki", "docker"]
    assert ctx.provider_chain(None, role="env") == ["docker"]
    assert ctx.provider_chain("local", role="agent") == ["local"]  # the step's own first


def test_the_runs_choices_come_first(state_root: Any) -> None:
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts(),
                      choices=RunChoices(agent_sandbox="tenki", env_sandbox="docker,local"),
                      sandbox_chain=["local"])
    assert ctx.provider_chain("smol_vm", role="agent") == ["tenki"]
    assert ctx.provider_chain("smol_vm", role="env") == ["docker", "local"]
    assert ctx.provider_chain("smol_vm") == ["local"]  # --sandbox for everything else


def test_the_choices_are_recorded_false_included() -> None:
    assert RunChoices(agent_sandbox="tenki", trajectory_filter=False).recorded() == {
        "agent_sandbox": "tenki", "trajectory_filter": False}

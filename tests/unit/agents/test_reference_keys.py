"""deploy_agent reads the keys task files written for the reference framework carry: what it
can honour it does, the rest is a preflight problem saying why (never silently dropped)."""

from __future__ import annotations

from agent_env.runtime import current
from agent_env.tasks.plan import check_steps
from agentenv_agents.steps import DeployAgent


def problems_of(**keys: object) -> list[str]:
    raw = DeployAgent.adapt({"id": "agent", "type": "deploy_agent", **keys})
    env = {"id": "env", "type": "deploy_env", "env_id": "echo"}
    _, found = check_steps([env, {**raw, "depends_on": ["env"]}],
                           current().host.registry("step_type"), {"envs": frozenset({"echo"})})
    return found


def test_network_policy_objects_read_as_open_or_sealed() -> None:
    adapt = DeployAgent.adapt
    assert adapt({"network_policy": {"mode": "allow_all", "allow_hosts": [],
                                     "allow_cidrs": []}})["network_policy"] == "open"
    assert adapt({"network_policy": {"mode": "allowlist"}})["network_policy"] == "sealed"
    assert problems_of(network_policy={"mode": "allowlist", "allow_hosts": []}) == []
    [problem] = problems_of(network_policy={"mode": "allowlist",
                                            "allow_hosts": ["pypi.org"]})
    assert "network_policy allowlist (pypi.org): egress allow-lists are not enforced" in problem


def test_reference_defaults_pass_and_other_values_say_why() -> None:
    assert problems_of(env_ids=["echo"], env_step_id="env", disk_size_gb=None,
                       litellm_base_url=None, enable_docker=False) == []
    text = "\n".join(problems_of(env_step_id="nope", disk_size_gb=20,
                                 litellm_base_url="http://proxy:4000", enable_docker=True))
    assert "env_step_id 'nope' names no step of this task" in text
    assert "env_step_id picks deployments of env_ids: give env_ids too" in text
    assert "disk_size_gb 20: no sandbox provider here sizes an agent's disk" in text
    assert "litellm_base_url: agents reach models only through the run's model gateway" in text
    assert "enable_docker: agents get no Docker daemon here" in text


def test_env_step_id_is_a_filter_on_the_envs_the_agent_gets() -> None:
    import attrs
    import pytest

    from agent_env.tasks.artifacts import MemoryArtifacts
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.steps import StepError

    @attrs.frozen
    class FakeDeployment:  # a test double: only what setup() reads of a deployed env
        instance_id: str

    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    ctx.add_env("echo", FakeDeployment("echo-aaaa"))
    ctx.outputs["first"] = {"instance_id": "echo-aaaa"}
    ctx.outputs["second"] = {"instance_id": "echo-bbbb"}
    setup = DeployAgent(id="a", env_ids=["echo"], env_step_id="first").setup(ctx)
    assert setup.envs["echo"].instance_id == "echo-aaaa"
    with pytest.raises(StepError, match="env_step_id 'second' names no deployment of echo"):
        DeployAgent(id="a", env_ids=["echo"], env_step_id="second").setup(ctx)

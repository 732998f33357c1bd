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


def test_snapshot_agent_state_reads_prompt_id_and_refuses_universes() -> None:
    from agentenv_agents.steps import SnapshotAgentState

    registry = current().host.registry("step_type")
    raw = [{"id": "snap", "type": "snapshot_agent_state", "prompt_id": "ask",
            "timeout_seconds": 60}]
    assert check_steps(raw, registry)[1] == []
    raw[0].update(artifact_id="state", env_id="mail")
    text = "\n".join(check_steps(raw, registry)[1])
    assert "artifact_id: snapshots are saved under the run's object-store prefix" in text
    assert "env_id: saving an env's service state beside the agent's is not supported" in text
    assert SnapshotAgentState.type == "snapshot_agent_state"


async def test_snapshot_agent_state_saves_the_conversation_of_prompt_id() -> None:
    from agent_env.tasks.artifacts import MemoryArtifacts
    from agent_env.tasks.context import TaskContext
    from agentenv_agents.steps import SnapshotAgentState

    class SavingAgent:  # a test double: records what it was asked to save
        name = "agent"

        def __init__(self) -> None:
            self.saved: list[str | None] = []

        async def save_snapshot(self, step: object, prefix: str) -> dict[str, str]:
            self.saved.append(getattr(step, "context_id", None))
            return {"prefix": prefix}

    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    agent = SavingAgent()
    ctx.agents["agent"] = agent  # type: ignore[assignment]
    ctx.outputs["ask"] = {"prompt_id": "ask", "response": "ok", "a2a_context_id": "ctx-42"}
    await SnapshotAgentState(id="snap", prompt_id="ask").run(ctx)
    assert agent.saved == ["ctx-42"]

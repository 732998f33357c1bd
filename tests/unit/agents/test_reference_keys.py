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


def test_network_policy_objects_read_as_open_sealed_or_an_allowlist() -> None:
    adapt = DeployAgent.adapt
    assert adapt({"network_policy": {"mode": "allow_all", "allow_hosts": [],
                                     "allow_cidrs": []}})["network_policy"] == "open"
    assert adapt({"network_policy": {"mode": "allowlist"}})["network_policy"] == "sealed"
    assert problems_of(network_policy={"mode": "allowlist", "allow_hosts": []}) == []
    listed = adapt({"network_policy": {"mode": "allowlist", "allow_hosts": ["pypi.org"],
                                       "allow_cidrs": ["10.1.0.0/16"]}})
    assert (listed["network_policy"], listed["allow_hosts"], listed["allow_cidrs"]) == (
        "allowlist", ["pypi.org"], ["10.1.0.0/16"])
    assert problems_of(network_policy={"mode": "allowlist",
                                       "allow_hosts": ["pypi.org", "*.npmjs.org"]}) == []
    # our own spelling: the flat keys
    assert problems_of(network_policy="allowlist", allow_cidrs=["192.0.2.0/24"]) == []


def test_a_wrong_allowlist_is_refused_naming_the_entry() -> None:
    text = "\n".join(problems_of(network_policy={
        "mode": "allowlist", "allow_hosts": ["https://pypi.org/simple", "*", "bad_host!"],
        "allow_cidrs": ["10.0.0.0/33"]}))
    assert "allow_hosts: 'https://pypi.org/simple' is not a host name (give the bare name" in text
    assert "'*' would allow every host: use network_policy 'open' instead" in text
    assert "allow_hosts: 'bad_host!' is not a host name" in text
    assert "allow_cidrs: '10.0.0.0/33' is not a CIDR" in text
    [problem] = problems_of(network_policy={"mode": "allow_all", "allow_hosts": ["pypi.org"]})
    assert problem.endswith("allow_hosts/allow_cidrs (pypi.org) need network_policy allowlist "
                            "(an open agent reaches every host, a sealed one only its gateways)")
    [problem] = problems_of(network_policy="allowlist")
    assert "network_policy allowlist lists nothing: give allow_hosts or allow_cidrs" in problem
    [problem] = problems_of(allow_hosts="pypi.org")  # a string is not a list of hosts
    assert "allow_hosts: invalid value for type, expected list" in problem
    [problem] = problems_of(network_policy="allowlist", allow_hosts=["pypi.org"],
                            enable_agent_changelog=True)
    assert "a allowlist agent cannot reach" not in problem
    assert "which an allowlist agent cannot reach" in problem


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

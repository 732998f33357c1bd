"""verifiers' own rollout code plays the example todo task through ``agentenv_verifiers``.

The model is the scripted model (a test double: every answer names it ``scripted:<script>``)
behind AgentEnv's model gateway, reached with verifiers' OpenAI Chat Completions client, as a
trainer would reach a served policy. The task scores the list's final state and the reply, so
the reward tells a right play from a short one. Docker tier: each rollout deploys or reuses a
real env behind its gateway.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
import verifiers as vf
from verifiers.clients.openai_chat_completions_client import OpenAIChatCompletionsClient

from agentenv_agents.model_gateway import ModelGateway
from agentenv_agents.scripted import ScriptedUpstream
from agentenv_verifiers.environment import close

pytestmark = pytest.mark.docker
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "episodes"
TOKEN = "test-token"
#: The right play: two adds, one completion, then the answer.
GOOD = {"name": "todo-good", "turns": [
    {"tool_calls": [{"name": "add_item", "arguments": {"text": "buy milk"}}]},
    {"tool_calls": [{"name": "add_item", "arguments": {"text": "walk the dog"}}]},
    {"match": {"last_tool_result_contains": "walk the dog"},
     "tool_calls": [{"name": "complete_item", "arguments": {"item_id": 1}}]},
    {"text": "1 item is still open."},
]}


@pytest.fixture
async def model(tmp_path: Path) -> AsyncIterator[OpenAIChatCompletionsClient]:
    script = tmp_path / "todo-good.json"
    script.write_text(json.dumps(GOOD))
    gateway = ModelGateway(ScriptedUpstream(script), token=TOKEN, host="127.0.0.1")
    await gateway.start()
    yield OpenAIChatCompletionsClient(openai.AsyncOpenAI(
        base_url=f"{gateway.url}/v1", api_key=TOKEN, max_retries=0))
    await gateway.stop()


@pytest.fixture
async def environment(state_root: Any, docker_client: Any) -> AsyncIterator[Any]:
    made: list[Any] = []

    def load(**options: Any) -> Any:
        env = vf.load_environment("agentenv-verifiers", **{"bundle": EXAMPLE, **options})
        made.append(env)
        return env

    yield load
    for env in made:
        await close(env)
        for served in env.served.values():
            from agent_env.episodes.episode import SPEC_LABEL

            left = docker_client.containers.list(
                all=True, filters={"label": f"{SPEC_LABEL}={served.spec.id}"})
            assert left == [], f"left behind: {[c.name for c in left]}"


def field(message: Any, name: str) -> Any:
    """A message's field: verifiers keeps some messages as dicts, some as its models."""
    return message.get(name) if isinstance(message, dict) else getattr(message, name)


def rollouts(outputs: Any) -> list[dict[str, Any]]:
    return list(outputs["outputs"])


async def test_verifiers_evaluates_the_task_with_the_scripted_model(
        environment: Any, model: Any) -> None:
    env = environment(turn_timeout=120)
    rows = env.get_dataset()
    assert [row["info"]["agentenv_task"] for row in rows] == ["todo"]
    assert [m["role"] for m in rows[0]["prompt"]] == ["system", "user"]
    assert rows[0]["prompt"][1]["content"].startswith("Add 'buy milk' and 'walk the dog'")
    outputs = await env.evaluate(model, model="scripted:todo-good", num_examples=-1,
                                 rollouts_per_example=2, max_concurrent=1, on_progress=[])
    played = rollouts(outputs)
    assert [r["reward"] for r in played] == [1.0, 1.0]
    for rollout in played:
        assert rollout["error"] is None and rollout["stop_condition"] == "turn_replied"
        assert (rollout["metrics"]["score_list_state"], rollout["metrics"]["score_reply"]) == (
            1.0, 1.0)
        assert [t.name for t in rollout["tool_defs"]] == [
            "add_item", "list_items", "complete_item"]
        tool_results = [field(m, "content") for m in rollout["completion"]
                         if field(m, "role") == "tool"]
        assert '"added_by": "planner"' in tool_results[0]  # called as the agent's role
    [served] = env.served.values()
    assert served.spec.pool.deploys == 2  # a group's rollouts run side by side
    again = await env.evaluate(model, model="scripted:todo-good", num_examples=-1,
                               rollouts_per_example=2, on_progress=[])
    assert [r["reward"] for r in rollouts(again)] == [1.0, 1.0]
    # the next group played on the same two envs, each reset (nothing of the last group left)
    assert (served.spec.pool.deploys, served.spec.pool.reuses) == (2, 2)


async def test_a_rollout_cut_short_is_scored_on_what_the_agent_did(
        environment: Any, model: Any) -> None:
    env = environment(turn_timeout=120, max_turns=2)  # two replies: the two adds, no more
    outputs = await env.evaluate(model, model="scripted:todo-good", num_examples=-1,
                                 rollouts_per_example=1, on_progress=[])
    [rollout] = rollouts(outputs)
    assert rollout["stop_condition"] == "max_turns_reached"
    assert rollout["reward"] == 0.0  # 'buy milk' was never completed, and nothing was said
    assert (rollout["metrics"]["score_list_state"], rollout["metrics"]["score_reply"]) == (
        0.0, 0.0)


async def test_bad_arguments_name_the_fix(environment: Any) -> None:
    """verifiers reports a load_environment error as its own RuntimeError, ours inside."""
    with pytest.raises(RuntimeError, match=r"serves no task 'nope' \(it serves todo\)"):
        environment(tasks=["nope"])
    with pytest.raises(RuntimeError, match=r"records no score at a step 'ask' \(it records "
                                           r"them at list_state, reply\)"):
        environment(reward="ask")


async def test_the_shipped_agents_smoke_bundle_scores_with_its_own_scripted_model(
        environment: Any, tmp_path: Path) -> None:
    """The bundle's own script (artifacts/echo_script) is the policy, as under agent-env run."""
    from agentenv_agents.plugin import agent_env_bundles

    [source] = [b for b in agent_env_bundles() if b.name == "agents-smoke"]
    script = Path(source.path) / "artifacts" / "echo_script" / "script.json"
    gateway = ModelGateway(ScriptedUpstream(script), token=TOKEN, host="127.0.0.1")
    await gateway.start()
    try:
        client = OpenAIChatCompletionsClient(openai.AsyncOpenAI(
            base_url=f"{gateway.url}/v1", api_key=TOKEN, max_retries=0))
        env = environment(bundle="agents-smoke", turn_timeout=120)
        outputs = await env.evaluate(client, model="scripted:echo_script", num_examples=-1,
                                     rollouts_per_example=1, on_progress=[])
    finally:
        await gateway.stop()
    [rollout] = rollouts(outputs)
    assert rollout["reward"] == 1.0, rollout["metrics"]
    assert (rollout["metrics"]["score_answer"], rollout["metrics"]["score_echoes"]) == (1.0, 1.0)

"""OpenEnv's own clients play the example todo task through ``agentenv_openenv.build_app``.

The task scores the todo list's final state and the agent's reply, so a good policy earns
reward 1 and a sloppy one 0: a right reward is never an accident. Docker tier: every reset
deploys (or reuses) a real env behind its gateway.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient

from .conftest import labelled

pytestmark = pytest.mark.docker
PROMPT = ("Add 'buy milk' and 'walk the dog' to my list, then mark 'buy milk' done. How many "
          "items are still open?")


def client(server: Any) -> GenericEnvClient:
    return GenericEnvClient(server.url, message_timeout_s=300)


async def call(env: GenericEnvClient, tool: str, **arguments: Any) -> Any:
    return await env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})


def items(step: Any) -> list[dict[str, Any]]:
    return json.loads(step.observation["result"]["data"])["items"]


async def good_turn(env: GenericEnvClient) -> Any:
    await call(env, "add_item", text="buy milk")
    await call(env, "add_item", text="walk the dog")
    await call(env, "complete_item", item_id=1)
    return await call(env, "end_turn", response="1 item is still open.")


async def test_a_client_plays_the_task_to_its_reward_and_the_env_is_reused(serve: Any) -> None:
    server = await serve()
    async with client(server) as env:
        first = await env.reset()
        observation = first.observation
        assert (first.done, observation["status"], observation["prompt"]) == (False, "ok", PROMPT)
        assert (observation["agent"], observation["turn"]) == ("planner", "ask")
        assert observation["envs"] == {"deploy": False}  # the first episode deploys
        listed = await env.step({"type": "list_tools"})
        assert [t["name"] for t in listed.observation["tools"]] == [
            "add_item", "list_items", "complete_item", "end_turn"]
        ended = await good_turn(env)
        assert (ended.done, ended.reward) == (True, 1.0)
        assert ended.observation["result"] == {
            "scores": {"list_state": 1.0, "reply": 1.0}, "outcome": "passed", "reward": 1.0}
        state = await env.state()
        assert (state["step_count"], state["done"], state["task"]["name"]) == (4, True, "todo")
        episode_id = state["episode_id"]

        second = await env.reset(task="todo")
        assert second.observation["envs"] == {"deploy": True}  # the pooled env, reset
        assert items(await call(env, "list_items")) == []  # nothing of the first episode
        await call(env, "add_item", text="junk")
        sloppy = await call(env, "end_turn", response="Two are open.")
        assert (sloppy.done, sloppy.reward) == (True, 0.0)
        assert (await env.state())["episode_id"] != episode_id
    assert server.spec.pool.deploys == 1


async def test_openenvs_mcp_tool_client_lists_calls_and_ends_the_turn(serve: Any) -> None:
    server = await serve()
    async with MCPToolClient(server.url, message_timeout_s=300) as env:
        await env.reset()
        assert "end_turn" in [tool.name for tool in await env.list_tools()]
        added = json.loads(await env.call_tool("add_item", text="buy milk"))
        assert added == {"id": 1, "text": "buy milk", "done": False, "added_by": "planner"}
        with pytest.raises(RuntimeError, match="tool_not_found"):
            await env.call_tool("delete_everything")
        with pytest.raises(RuntimeError, match="execution_error"):
            await env.call_tool("complete_item", item_id=99)  # the env's own error
        ended = await env.step(CallToolAction(tool_name="end_turn",
                                              arguments={"response": "one"}))
        # the reply is right, the list is not ('walk the dog' was never added): the default
        # reward is the mean of the task's scores
        assert ended.done and ended.reward == 0.5
        assert ended.observation.result["scores"] == {"list_state": 0.0, "reply": 1.0}


async def test_concurrent_sessions_each_play_on_an_env_of_their_own(serve: Any,
                                                                    docker_client: Any) -> None:
    server = await serve(max_concurrent_envs=3)

    async def session(index: int) -> tuple[str, list[dict[str, Any]], float | None]:
        async with client(server) as env:
            await env.reset()
            await call(env, "add_item", text=f"only mine: {index}")
            seen = items(await call(env, "list_items"))
            await asyncio.sleep(0.2)  # the others are mid-episode too
            ended = await call(env, "end_turn", response="none")
            return (await env.state())["episode_id"], seen, ended.reward

    played = await asyncio.gather(*(session(i) for i in range(3)))
    assert len({episode for episode, _, _ in played}) == 3
    for index, (_, seen, reward) in enumerate(played):
        assert [item["text"] for item in seen] == [f"only mine: {index}"]
        assert reward == 0.0
    assert server.spec.pool.deploys == 3


async def test_a_client_gone_mid_episode_releases_its_env_within_seconds(serve: Any) -> None:
    server = await serve()
    env = client(server)
    await env.connect()
    await env.reset()
    await call(env, "add_item", text="left behind")
    episode = server.spec.episodes[0]
    await env._ws.close()  # the connection drops: no close message, no end_turn
    started = time.monotonic()
    while server.served.sessions or episode.state != "finished":
        assert time.monotonic() - started < 10, "the session still holds its episode"
        await asyncio.sleep(0.05)
    assert episode.abandon_reason == "the client left the session"
    assert list(episode.env_returns.values()) == ["reset"]
    assert server.spec.pool.idle_count() == 1  # back in the pool, reset
    async with client(server) as again:
        reset = await again.reset()
        assert reset.observation["envs"] == {"deploy": True}
        assert items(await call(again, "list_items")) == []


async def test_a_reset_storm_reuses_one_env_and_leaks_nothing(serve: Any,
                                                               docker_client: Any) -> None:
    server = await serve()
    async with client(server) as env:
        await env.reset()
        up = sorted(labelled(docker_client, server.spec.id))
        for _ in range(100):
            reset = await env.reset()
            assert reset.observation["status"] == "ok"
        assert sorted(labelled(docker_client, server.spec.id)) == up
    pool = server.spec.pool
    assert (pool.deploys, pool.reuses, pool.quarantined) == (1, 100, 0)


async def test_an_env_whose_reset_leaves_state_is_replaced_and_the_client_told(
        serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import agent_env.episodes.pool as pool_module

    async def skipped_reset(deployment: Any) -> None:
        """Fault injection: the env's data/reset is never sent, so what the episode added is
        still there and the pool's state check must catch it."""

    monkeypatch.setattr(pool_module, "reset_env", skipped_reset)
    server = await serve()
    async with client(server) as env:
        await env.reset()
        await call(env, "add_item", text="stays behind")
        await call(env, "end_turn", response="none")
        replaced = await env.reset()
        observation = replaced.observation
        assert observation["status"] == "env_replaced", observation
        assert "failed its reset" in observation["message"]
        assert observation["envs"] == {"deploy": False}  # deployed afresh
        assert items(await call(env, "list_items")) == []
    assert (server.spec.pool.quarantined, server.spec.pool.deploys) == (1, 2)


async def test_bad_resets_and_steps_answer_a_clear_status(serve: Any) -> None:
    server = await serve()
    async with aiohttp.ClientSession() as http, http.get(f"{server.url}/agentenv/tasks") as got:
        listed = await got.json()
    assert [t["name"] for t in listed["all"]] == ["todo"]
    async with client(server) as env:
        early = await call(env, "list_items")
        assert early.done and early.observation["error"]["message"] == (
            "no episode is running in this session; call reset")
        for kwargs, message in [
            ({"split": "train"}, "there is no split 'train'; the splits are all"),
            ({"index": 3}, "split 'all' has 1 task(s): index must be 0 to 0, not 3"),
            ({"task": "nope"}, "split 'all' has no task 'nope' (its tasks: todo)"),
        ]:
            bad = await env.reset(**kwargs)
            assert (bad.done, bad.observation["status"], bad.observation["message"]) == (
                True, "error", message)
    assert server.spec.pool.deploys == 0  # nothing was deployed for a bad reset


async def test_a_model_plays_the_shipped_agents_smoke_bundle_over_openenv(serve: Any) -> None:
    """The policy is the bundle's own scripted model (a test double, named scripted:...)
    behind AgentEnv's model gateway, asked with the openai SDK: a model's loop over OpenEnv."""
    import openai

    from agentenv_agents.model_gateway import ModelGateway
    from agentenv_agents.plugin import agent_env_bundles
    from agentenv_agents.scripted import ScriptedUpstream

    [source] = [b for b in agent_env_bundles() if b.name == "agents-smoke"]
    script = source.path / "artifacts" / "echo_script" / "script.json"
    gateway = ModelGateway(ScriptedUpstream(script), token="t", host="127.0.0.1")
    await gateway.start()
    server = await serve(bundle="agents-smoke")
    model = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="t", max_retries=0)
    try:
        async with client(server) as env:
            first = await env.reset()
            listed = await env.step({"type": "list_tools"})
            tools = [{"type": "function", "function": {
                "name": t["name"], "description": t["description"],
                "parameters": t["input_schema"]}}
                for t in listed.observation["tools"] if t["name"] != "end_turn"]
            messages: list[Any] = [{"role": "user", "content": first.observation["prompt"]}]
            while True:
                answer = await model.chat.completions.create(
                    model="scripted:echo_script", messages=messages, tools=tools)
                reply = answer.choices[0].message
                messages.append(reply.model_dump(exclude_none=True))
                if not reply.tool_calls:
                    break
                for tool_call in reply.tool_calls:
                    step = await call(env, tool_call.function.name,
                                      **json.loads(tool_call.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": tool_call.id,
                                     "content": step.observation["result"]["data"]})
            ended = await call(env, "end_turn", response=reply.content)
    finally:
        await gateway.stop()
    assert answer.model == "scripted:echo_script"
    assert (ended.done, ended.reward) == (True, 1.0)
    assert ended.observation["result"]["scores"] == {"answer": 1.0, "echoes": 1.0}


TWO_TURNS = [
    {"id": "deploy", "type": "deploy_env", "env_id": "todo", "sandbox_type": "docker"},
    {"id": "planner", "type": "deploy_agent", "agent_name": "planner", "env_ids": ["todo"],
     "role": "planner"},
    {"id": "first", "type": "prompt_agent", "agent_name": "planner", "prompt": "Add 'buy milk'."},
    {"id": "after_first", "type": "env_outcome_verifier", "env_id": "todo",
     "file_artifact_id": "check_todo", "verifier_id": "after_first"},
    {"id": "second", "type": "prompt_agent", "agent_name": "planner",
     "prompt": "Add 'walk the dog', complete 'buy milk', and say how many are open."},
    {"id": "list_state", "type": "env_outcome_verifier", "env_id": "todo",
     "file_artifact_id": "check_todo", "verifier_id": "list_state"},
]


async def test_a_verifier_between_turns_gives_an_intermediate_reward(
        serve: Any, tmp_path: Any) -> None:
    import shutil

    from .conftest import EXAMPLE

    bundle = tmp_path / "two-turns"
    shutil.copytree(EXAMPLE, bundle, ignore=shutil.ignore_patterns("tasks", "__pycache__"))
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "two.json").write_text(json.dumps(TWO_TURNS))
    server = await serve(bundle=bundle)
    async with client(server) as env:
        first = await env.reset()
        assert first.observation["prompt"] == "Add 'buy milk'."
        await call(env, "add_item", text="buy milk")
        between = await call(env, "end_turn", response="Added.")
        result = between.observation["result"]
        assert not between.done and result["turn"] == "second"
        assert result["prompt"].startswith("Add 'walk the dog'")
        # what the verifier between the turns scored (the list is not done yet: 0)
        assert (result["scores"], between.reward) == ({"after_first": 0.0}, 0.0)
        await call(env, "add_item", text="walk the dog")
        await call(env, "complete_item", item_id=1)
        ended = await call(env, "end_turn", response="1 is open.")
    assert ended.observation["result"]["scores"] == {"after_first": 0.0, "list_state": 1.0}
    assert ended.done and ended.reward == 0.5  # the task's reward: the mean of its scores

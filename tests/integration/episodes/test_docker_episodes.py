"""Episodes of the example todo task on real Docker: scores, abandon, deadlines, reuse.

The task (``examples/episodes``) deploys a todo env behind its gateway, stands the trainer in for
the ``planner`` agent, and scores the list's final state and the reply. A good scripted policy
scores 1 on both, a sloppy one 0 on both, so a right score is never an accident.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from agent_env.task import Episode, EpisodeError, EpisodeFailed, EpisodeSpec, Task, TurnTools
from agentenv_agents.steps import read_trajectory

from .conftest import EXAMPLE

pytestmark = pytest.mark.docker
Policy = Callable[[TurnTools], Awaitable[str]]
GOOD = {"list_state": 1.0, "reply": 1.0}
BAD = {"list_state": 0.0, "reply": 0.0}


def text_of(result: dict[str, Any]) -> Any:
    return json.loads(result["content"][0]["text"])


async def good(tools: TurnTools) -> str:
    assert text_of(await tools.call("list_items", {}))["items"] == []  # nothing leaked in
    await tools.call("add_item", {"text": "buy milk"})
    await tools.call("add_item", {"text": "walk the dog"})
    await tools.call("complete_item", {"item_id": 1})
    return f"{text_of(await tools.call('list_items', {}))['open']} item is still open."


async def sloppy(tools: TurnTools) -> str:
    await tools.call("add_item", {"text": "buy milk"})
    await tools.call("add_item", {"text": "junk"})
    await tools.call("add_item", {"text": "walk the dog"})
    return "Two are open."


async def play(spec: EpisodeSpec, policy: Policy) -> tuple[Episode, dict[str, float]]:
    episode = await spec.start()
    while (turn := await episode.next_turn()) is not None:
        assert turn.agent == "planner" and turn.system_prompt
        async with turn.tools() as tools:
            reply = await policy(tools)
        await turn.end(response=reply)
    return episode, await episode.result()


def record(episode_id: str) -> Any:
    from agent_env.runtime import current
    from agent_env.tasks.records import StoredInstances

    return StoredInstances(current().document_store).get(episode_id)


@pytest.fixture
def todo_task(state_root: Any, docker_client: Any) -> Task:
    stored = Task.from_bundle(EXAMPLE, "todo")
    return Task.get(stored.id)  # as the seed's snippet gets it


async def test_eight_scripted_episodes_side_by_side_get_the_right_scores(
        todo_task: Task, leftovers: Callable[[str], list[str]]) -> None:
    spec = EpisodeSpec.from_task(todo_task, turn_timeout=120)
    policies = [good if n % 2 == 0 else sloppy for n in range(8)]
    played = await asyncio.gather(*(play(spec, policy) for policy in policies))
    assert [scores for _, scores in played] == [GOOD if n % 2 == 0 else BAD for n in range(8)]
    for episode, scores in played:
        stored = record(episode.id)
        assert stored.scores == scores  # what agent-env task get-instance shows
        assert stored.outcome == ("passed" if scores == GOOD else "scored below 1")
        calls = read_trajectory(stored.context["outputs"]["ask"]["agent_trajectory_object_key"])
        assert {call["tool"] for call in calls} <= {"add_item", "list_items", "complete_item"}
    assert len({episode.id for episode, _ in played}) == 8
    assert leftovers(spec.id) == []


async def test_abandon_mid_turn_records_cancelled_and_tears_everything_down(
        todo_task: Task, leftovers: Callable[[str], list[str]]) -> None:
    spec = EpisodeSpec.from_task(todo_task)
    episode = await spec.start()
    turn = await episode.next_turn()
    assert turn is not None
    async with turn.tools() as tools:
        await tools.call("add_item", {"text": "buy milk"})
        assert leftovers(spec.id) != []  # the env is up while the turn is open
        await episode.abandon("the trainer was preempted")
        with pytest.raises(EpisodeError, match="is over"):
            await tools.call("list_items", {})
    assert leftovers(spec.id) == []
    stored = record(episode.id)
    assert (stored.status, stored.outcome, stored.cancel_reason) == (
        "cancelled", "cancelled", "the trainer was preempted")
    with pytest.raises(EpisodeError) as caught:
        await episode.next_turn()
    assert str(caught.value) == "episode abandoned: the trainer was preempted"


async def test_a_turn_not_ended_by_its_deadline_fails_the_run(
        todo_task: Task, leftovers: Callable[[str], list[str]]) -> None:
    spec = EpisodeSpec.from_task(todo_task, turn_timeout=1.5)
    episode = await spec.start()
    turn = await episode.next_turn()
    assert turn is not None and turn.timeout_seconds == 1.5
    with pytest.raises(EpisodeError) as caught:
        await episode.result()
    assert str(caught.value) == ("turn 'ask' of agent 'planner' isn't ended, so the run can't "
                                 "finish")
    with pytest.raises(EpisodeFailed) as failed:
        await episode.next_turn()  # waits for the run, which the deadline ends
    assert "turn 'ask' of agent 'planner' was not ended within 1.5s" in str(failed.value)
    await turn.end(response="1 is open")  # too late: changes nothing
    assert turn.state == "timed out"
    with pytest.raises(EpisodeFailed):
        await episode.result()
    assert record(episode.id).status == "failed"
    assert leftovers(spec.id) == []


async def test_reuse_resets_envs_between_episodes_and_never_leaks_state(
        todo_task: Task, leftovers: Callable[[str], list[str]]) -> None:
    async def messy(spec: EpisodeSpec) -> tuple[Episode, dict[str, float]]:
        """The sloppy policy, and a rule hiding list_items from the planner on the gateway."""
        episode = await spec.start()
        turn = await episode.next_turn()
        assert turn is not None
        async with turn.tools() as tools:
            reply = await sloppy(tools)
        deployment = next(iter(episode.ctx.envs.values()))
        async with aiohttp.ClientSession(headers=deployment.headers) as http:
            async with http.post(f"{deployment.url}/tools/disable",
                                 json={"role": "planner", "tools": ["list_items"]}) as resp:
                assert resp.status == 200
        await turn.end(response=reply)
        assert await episode.next_turn() is None
        return episode, await episode.result()

    async with EpisodeSpec.from_task(todo_task, reuse_envs=True) as spec:
        first = await asyncio.gather(*(messy(spec) for _ in range(3)))
        assert [scores for _, scores in first] == [BAD] * 3
        assert spec.pool is not None and spec.pool.idle_count() == 3
        second = await asyncio.gather(*(play(spec, good) for _ in range(3)))
        assert [scores for _, scores in second] == [GOOD] * 3
        assert (spec.pool.deploys, spec.pool.reuses) == (3, 3)
        first_envs = {record(e.id).context["outputs"]["deploy"]["instance_id"] for e, _ in first}
        second_outputs = [record(e.id).context["outputs"]["deploy"] for e, _ in second]
        assert {o["instance_id"] for o in second_outputs} == first_envs
        assert all(o["reused"] for o in second_outputs)
        assert leftovers(spec.id) != []  # idle in the pool until the spec closes
    assert leftovers(spec.id) == []


async def test_32_episodes_side_by_side_with_reuse_and_at_most_8_envs(
        todo_task: Task, leftovers: Callable[[str], list[str]]) -> None:
    async with EpisodeSpec.from_task(todo_task, reuse_envs=True, max_envs=8) as spec:
        played = await asyncio.gather(*(play(spec, good) for _ in range(32)))
        assert [scores for _, scores in played] == [GOOD] * 32
        assert spec.pool is not None
        assert spec.pool.deploys <= 8 and spec.pool.deploys + spec.pool.reuses == 32
    assert leftovers(spec.id) == []


def test_an_idle_pool_left_open_is_torn_down_at_interpreter_exit(
        todo_task: Task, leftovers: Callable[[str], list[str]], tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    script = tmp_path / "leave_open.py"
    script.write_text(f"""
import asyncio, json
from agent_env.task import EpisodeSpec, Task

async def main():
    spec = EpisodeSpec.from_task(Task.get({todo_task.id!r}), reuse_envs=True)
    episode = await spec.start()
    turn = await episode.next_turn()
    await turn.end(response="1")
    await episode.result()
    print(json.dumps({{"spec": spec.id, "idle": spec.pool.idle_count()}}), flush=True)

asyncio.run(main())  # exits without spec.close(): the pool's env is still up
""")
    done = subprocess.run([sys.executable, str(script)], env=dict(os.environ), text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout.strip().splitlines()[-1])
    assert told["idle"] == 1
    assert leftovers(told["spec"]) == []

"""Episodes whose envs live on the nodes of the two-node test cluster (issue 15 point 4): the
trainer's loop runs here, each env (containers and gateway) on a node with a free
``agentenv_env_slots``, reached through its gateway; every episode scores as it would on one
machine, both nodes hold envs, a node never holds more than its slots, nothing is left."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agent_env.task import EpisodeSpec, Task, TurnTools

pytestmark = pytest.mark.docker
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "episodes"
GOOD = {"list_state": 1.0, "reply": 1.0}
LABEL = "agentenv.episodes"


def text_of(result: dict[str, Any]) -> Any:
    return json.loads(result["content"][0]["text"])


async def good(tools: TurnTools) -> str:
    assert text_of(await tools.call("list_items", {}))["items"] == []  # nothing leaked in
    await tools.call("add_item", {"text": "buy milk"})
    await tools.call("add_item", {"text": "walk the dog"})
    await tools.call("complete_item", {"item_id": 1})
    return f"{text_of(await tools.call('list_items', {}))['open']} item is still open."


async def play(spec: EpisodeSpec) -> dict[str, float]:
    episode = await spec.start()
    while (turn := await episode.next_turn()) is not None:
        async with turn.tools() as tools:
            reply = await good(tools)
        await turn.end(response=reply)
    return await episode.result()


@pytest.fixture
def todo_task(state_root: Any, docker_client: Any, ray_cluster: Any) -> Task:
    return Task.get(Task.from_bundle(EXAMPLE, "todo").id)


async def test_32_episodes_from_here_with_their_envs_on_both_nodes(
        todo_task: Task, docker_client: Any) -> None:
    import ray

    from agentenv_ray_runner.runner import SLOT_RESOURCE

    slots = ray.cluster_resources()[SLOT_RESOURCE]
    nodes_seen: set[str] = set()
    most_up = 0
    # envs reused between episodes, at most as many up as the cluster has slots
    spec = EpisodeSpec.from_task(todo_task, turn_timeout=120, sandbox="ray", reuse_envs=True,
                                 max_envs=int(slots))

    async def watch() -> None:  # how many envs are up at once, by their containers' labels
        nonlocal most_up
        while True:
            up = await asyncio.to_thread(docker_client.containers.list, filters={
                "label": f"{LABEL}={spec.id}"})
            envs = {c.labels.get("agentenv.env_instance") for c in up} - {None}
            most_up = max(most_up, len(envs))
            await asyncio.sleep(0.2)

    watcher = asyncio.ensure_future(watch())
    try:
        async with spec:
            scores = await asyncio.gather(*(play(spec) for _ in range(32)))
            assert scores == [GOOD] * 32
            assert spec.pool is not None
            for entries in spec.pool.idle.values():  # the pooled envs, on the nodes holding them
                for entry in entries:
                    nodes_seen.add(entry.deployment.sandbox.describe()["ray_node_id"])
    finally:
        watcher.cancel()
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert nodes_seen == alive and len(alive) == 2, nodes_seen
    assert 1 <= most_up <= slots, (most_up, slots)
    deadline = time.monotonic() + 10  # every slot given back (Ray frees them asynchronously)
    while ray.available_resources().get(SLOT_RESOURCE) != slots:
        assert time.monotonic() < deadline, ray.available_resources().get(SLOT_RESOURCE)
        await asyncio.sleep(0.1)
    left = docker_client.containers.list(all=True, filters={"label": f"{LABEL}={spec.id}"})
    assert left == []

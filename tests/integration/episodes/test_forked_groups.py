"""Forked episode groups on real Docker: both ways of copying the warmed env, isolation, teardown.

The bundle (``fork_bundle/``) has two envs with the same tools (``add_entry``, ``entries``):
``ledger`` keeps its entries in memory and serves a faithful data plane (it forks by data/get
snapshot), ``shelf`` keeps them as files and serves no data plane (it forks by image commit).
``warm`` adds one entry to the origin. Every member first reads the entries (it must see the
warmed one, so it did not start fresh), adds one of its own, waits until every member has added
its own, and reads again: it must see its own and no other member's. The task's verifier scores
exactly that final state.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_env.episodes.fork import GROUP_LABEL
from agent_env.task import Episode, EpisodeError, EpisodeFailed, EpisodeSpec, Task

pytestmark = pytest.mark.docker
BUNDLE = Path(__file__).with_name("fork_bundle")
PASSED = {"state": 1.0}


def entries_of(result: dict[str, Any]) -> list[str]:
    return json.loads(result["content"][0]["text"])["entries"]


def warm_with(text: str) -> Any:
    async def warm(env: Any) -> None:
        async with env.mcp() as client:
            await client.call_tool("add_entry", {"text": text})

    return warm


async def play_member(episode: Episode, index: int, added: asyncio.Barrier,
                      seen: dict[int, tuple[list[str], list[str]]]) -> None:
    turn = await episode.next_turn()
    assert turn is not None
    async with turn.tools() as tools:
        first = entries_of(await tools.call("entries", {}))
        await tools.call("add_entry", {"text": f"member-{index}"})
        await added.wait()  # every member has written before any reads again
        seen[index] = (first, entries_of(await tools.call("entries", {})))
    await turn.end(response="added")
    assert await episode.next_turn() is None


async def play_group(spec: EpisodeSpec, n: int, warm_text: str, fork: str = "auto",
                     during: Callable[[Any], None] | None = None
                     ) -> tuple[Any, dict[int, tuple[list[str], list[str]]], list[Any]]:
    group = await spec.start_group(n, warm=warm_with(warm_text), fork=fork)
    added = asyncio.Barrier(n)
    seen: dict[int, tuple[list[str], list[str]]] = {}
    await asyncio.gather(*(play_member(e, i, added, seen)
                           for i, e in enumerate(group.episodes)))
    if during is not None:
        during(group)
    return group, seen, await group.results()


def record(episode_id: str) -> Any:
    from agent_env.runtime import current
    from agent_env.tasks.records import StoredInstances

    return StoredInstances(current().document_store).get(episode_id)


def images_of(docker_client: Any, group_id: str) -> list[str]:
    return [tag for image in docker_client.images.list(filters={
        "label": f"{GROUP_LABEL}={group_id}"}) for tag in image.tags]


@pytest.fixture
def bundle_tasks(state_root: Any, docker_client: Any) -> dict[str, Task]:
    return {name: Task.get(Task.from_bundle(BUNDLE, name).id) for name in ("ledger", "shelf")}


async def test_a_data_plane_group_starts_every_member_from_the_warm_state_each_isolated(
        bundle_tasks: dict[str, Task], leftovers: Callable[[str], list[str]]) -> None:
    spec = EpisodeSpec.from_task(bundle_tasks["ledger"], turn_timeout=120, reuse_envs=True)
    async with spec:
        group, seen, results = await play_group(spec, 4, "warm-1")
        assert group.how == {"deploy": "data-plane"}
        for index in range(4):
            assert seen[index] == (["warm-1"], ["warm-1", f"member-{index}"])
        assert results == [PASSED] * 4
        # A second group of the same spec takes the pool's envs: each was reset to fresh
        # (verified) when given back, then loaded with the new group's snapshot.
        deploys = spec.pool.deploys
        group2, seen2, results2 = await play_group(spec, 3, "warm-2")
        assert [seen2[i] for i in range(3)] == [
            (["warm-2"], ["warm-2", f"member-{i}"]) for i in range(3)]
        assert results2 == [PASSED] * 3
        assert (spec.pool.deploys, spec.pool.quarantined) == (deploys, 0)
        assert spec.pool.reuses >= 3
        for each, episode in [(group, e) for e in group.episodes] + [
                (group2, e) for e in group2.episodes]:
            stored = record(episode.id)  # what agent-env task get-instance shows
            assert stored.context["outputs"]["deploy"]["fork"] == {
                "group": each.id, "how": "data-plane"}
            assert stored.context["metadata"]["episode"]["group"] == each.id
    assert leftovers(spec.id) == []


async def test_an_image_commit_group_starts_every_member_from_the_warm_files_each_isolated(
        bundle_tasks: dict[str, Task], leftovers: Callable[[str], list[str]],
        docker_client: Any) -> None:
    spec = EpisodeSpec.from_task(bundle_tasks["shelf"], turn_timeout=120)
    committed: list[str] = []
    async with spec:
        group, seen, results = await play_group(
            spec, 4, "warm-files",
            during=lambda g: committed.extend(images_of(docker_client, g.id)))
        assert group.how == {"deploy": "image-commit"}
        for index in range(4):
            assert seen[index] == (["warm-files"], ["warm-files", f"member-{index}"])
        assert results == [PASSED] * 4
        assert len(committed) == 1 and committed[0].startswith("agentenv/fork-env:")
        assert images_of(docker_client, group.id) == []  # removed with the group
    assert leftovers(spec.id) == []


async def test_fork_data_on_an_env_without_a_data_plane_fails_every_member_by_name(
        bundle_tasks: dict[str, Task], leftovers: Callable[[str], list[str]]) -> None:
    spec = EpisodeSpec.from_task(bundle_tasks["shelf"], turn_timeout=60)
    async with spec:
        group = await spec.start_group(2, warm=warm_with("warm"), fork="data")
        outcomes = await group.results(return_exceptions=True)
        assert all(isinstance(o, EpisodeFailed) for o in outcomes), outcomes
        assert all("failed at step 'deploy'" in str(o) and "fork='data': env 'shelf' cannot be "
                   "snapshot over the data plane" in str(o) for o in outcomes), outcomes
    assert leftovers(spec.id) == []


async def test_group_arguments_are_checked_before_anything_starts(
        bundle_tasks: dict[str, Task]) -> None:
    spec = EpisodeSpec.from_task(bundle_tasks["ledger"])
    async with spec:
        with pytest.raises(EpisodeError, match="positive whole number of episodes, not 0"):
            await spec.start_group(0)
        with pytest.raises(EpisodeError, match="fork must be one of 'auto', 'data', 'commit'"):
            await spec.start_group(2, fork="snapshot")
        with pytest.raises(EpisodeError, match="warm must be an async function"):
            await spec.start_group(2, warm="seed")  # type: ignore[arg-type]
        assert spec.episodes == []

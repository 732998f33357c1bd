"""The ``a2a`` agent type's tests. The Docker ones (``task``) need a real daemon or skip with the
reason (a failure under ``CI=true``); each gets its own state root and ``agentenv.run`` label
(``run_id``), whose leftovers are removed after the test and reported by ``leftovers``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_env.tasks.context import TaskContext
from agentenv_agents.plugin import BUNDLES

SMOKE = BUNDLES / "agents-smoke"


@pytest.fixture
def leftovers(docker_client: Any, run_id: str) -> Callable[[], list[str]]:
    def names() -> list[str]:
        label = {"label": f"agentenv.run={run_id}"}
        return ([c.name for c in docker_client.containers.list(all=True, filters=label)]
                + [n.name for n in docker_client.networks.list(filters=label)])

    return names


def store_smoke_bundle(folder: Path = SMOKE) -> tuple[dict[str, str], Any]:
    """Store the agents-smoke bundle's envs and artifacts; name -> id and the artifact source."""
    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.runtime import current

    bundle, problems = parse_bundle(folder, "@test/agents-smoke")
    assert problems == []
    ledger = Ledger(current().versioned_store, current().object_store)
    for env in bundle.envs:
        ledger.write_files_entity("envs", env)
    for artifact in bundle.artifacts:
        ledger.write_files_entity("artifacts", artifact)
    ids = {e.name: e.id for e in bundle.envs}
    ids.update({a.name: a.id for a in bundle.artifacts})
    return ids, StoredArtifacts(current().versioned_store, current().object_store)


@pytest.fixture
def store_bundle() -> Callable[..., tuple[dict[str, str], Any]]:
    """``store_smoke_bundle``, for tests that store a bundle of their own."""
    return store_smoke_bundle


@pytest.fixture
async def task(state_root: Path, run_id: str) -> AsyncIterator[tuple[TaskContext, dict[str, str]]]:
    ids, artifacts = store_smoke_bundle()
    ctx = TaskContext(task_id="@test/agents-smoke/t", instance_id=run_id, artifacts=artifacts)
    yield ctx, ids
    report = await ctx.teardown.run()
    assert report.failed == ()

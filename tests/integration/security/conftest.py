"""Security tier: hostile inputs against real containers and real HTTP servers.

Docker tests here get their own state root (sharing the session's protocol wheel) and a unique
``agentenv.run`` label whose leftovers are removed after the test (``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


def store_bundle_envs(name: str) -> tuple[dict[str, str], Any]:
    """Store ``bundles/<name>``'s envs through the run's ledger; name -> id, and the artifacts."""
    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.runtime import current

    bundle, problems = parse_bundle(HERE / "bundles" / name, f"@test/{name}")
    assert problems == []
    ledger = Ledger(current().versioned_store, current().object_store)
    for env in bundle.envs:
        ledger.write_files_entity("envs", env)
    artifacts = StoredArtifacts(current().versioned_store, current().object_store)
    return {e.name: e.id for e in bundle.envs}, artifacts


@pytest.fixture
async def deployed_vault(build_state_root: Path, docker_client: Any,
                         run_id: str) -> AsyncIterator[Any]:
    """The ``vault`` env deployed by ``deploy_env`` on the docker provider (its defaults)."""
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.step_types.env_steps import DeployEnv

    ids, artifacts = store_bundle_envs("secure")
    ctx = TaskContext(task_id="@test/secure/t", instance_id=run_id, artifacts=artifacts)
    try:
        await DeployEnv(id="deploy", env_id=ids["vault"], sandbox_type="docker",
                        ttl_seconds=600).run(ctx)
        yield ctx.env(ids["vault"])
    finally:
        report = await ctx.teardown.run()
        assert report.failed == ()

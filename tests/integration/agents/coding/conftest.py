"""What the coding-agent tests share: a task context holding the claude-code-smoke bundle's echo
env, and ``deploy``, which registers scripts for the SCRIPTED model, deploys the echo env and
one shipped coding agent into its sandbox (images the smoke bundles build: found by content
hash, not rebuilt)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_env.tasks.context import TaskContext
from agent_env.tasks.step_types.env_steps import DeployEnv
from agentenv_agents.a2a_type import run_scripts
from agentenv_agents.plugin import BUNDLES
from agentenv_agents.steps import DeployAgent

#: ``await deploy(ctx, ids, agent, {script name: script})``
Deploy = Callable[[TaskContext, dict[str, str], str, dict[str, Any]], Awaitable[None]]


@pytest.fixture
async def task(state_root: Path, run_id: str) -> AsyncIterator[tuple[TaskContext, dict[str, str]]]:
    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.runtime import current

    bundle, problems = parse_bundle(BUNDLES / "claude-code-smoke", "@test/claude-code-smoke")
    assert problems == []
    ledger = Ledger(current().versioned_store, current().object_store)
    for env in bundle.envs:
        ledger.write_files_entity("envs", env)
    ids = {e.name: e.id for e in bundle.envs}
    artifacts = StoredArtifacts(current().versioned_store, current().object_store)
    ctx = TaskContext(task_id="@test/coding-agents/t", instance_id=run_id, artifacts=artifacts)
    yield ctx, ids
    report = await ctx.teardown.run()
    assert report.failed == ()


#: Aider sends a fixed "Ok." reply in every request: for it, a script's turns start one later.
FIXED_TURNS = {"aider": [{"text": "(never served: aider's fixed 'Ok.')"}]}


async def _deploy(ctx: TaskContext, ids: dict[str, str], agent: str,
                 scripts: dict[str, Any]) -> None:
    for name, script in scripts.items():  # what a scripted_model step registers
        turns = FIXED_TURNS.get(agent, []) + script["turns"]
        run_scripts(ctx)[name] = {**script, "turns": turns}
    await DeployEnv(id="deploy", env_id=ids["echo"], sandbox_type="docker").run(ctx)
    await DeployAgent(id="agent", agent_name=agent, a2a_agent_id=agent,
                      env_ids=[ids["echo"]]).run(ctx)


@pytest.fixture
def deploy() -> Deploy:
    return _deploy

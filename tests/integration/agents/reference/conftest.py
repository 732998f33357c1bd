"""Fixtures for deploying the reference-SDK test agent (``reference_agent/``) through our kernel.

The agent folder is contributed the way any plugin ships agents, through ``agent_env_agents``,
by a small test plugin registered on the test's runtime (its own state root). The echo env comes
from the shipped agents-smoke bundle, stored with the agents/a2a tests' helper.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_env import runtime
from agent_env.contributions import AgentSource
from agent_env.hookspecs import hookimpl
from agent_env.plugins import PluginRecord
from agent_env.tasks.context import TaskContext

HERE = Path(__file__).parent
AGENT_ID = "reference-test-agent"
AGENT_FOLDER = HERE / "reference_agent"
SLOW_BUNDLE = HERE.parent / "a2a" / "bundles" / "slow"


def _a2a_helpers() -> Any:
    """The agents/a2a tests' conftest (``store_smoke_bundle``), loaded from its file: test
    folders are not packages, and that one is not on ``pythonpath``."""
    spec = importlib.util.spec_from_file_location(
        "agents_a2a_conftest", HERE.parent / "a2a" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


store_smoke_bundle = _a2a_helpers().store_smoke_bundle


class ReferenceAgentPlugin:
    """A test plugin: ships the reference-SDK agent folder as ``reference-test-agent``."""

    @hookimpl
    def agent_env_agents(self) -> list[AgentSource]:
        return [AgentSource(AGENT_ID, AGENT_FOLDER)]


@pytest.fixture
def reference_runtime(build_state_root: Path) -> runtime.Runtime:
    """The test's default runtime (every installed plugin) plus the test plugin."""
    current = runtime.current()
    host = current.host
    record = PluginRecord("reference_agent_fixture", "agentenv-tests", "0",
                          "tests.integration.agents.reference.conftest")
    host.records.append(record)
    host._register(record, ReferenceAgentPlugin())  # as the agent-type unit tests do
    assert any(c.name == AGENT_ID and c.status == "active"
               for c in host.contributions("agent")), "the test plugin's agent is not listed"
    return current


@pytest.fixture
async def task(reference_runtime: runtime.Runtime,
               run_id: str) -> AsyncIterator[tuple[TaskContext, dict[str, str]]]:
    """A task context labelled ``run_id`` with the agents-smoke and slow bundles stored (envs
    ``echo`` and ``slow``); torn down after the test, every step of it successfully."""
    ids, artifacts = store_smoke_bundle()
    slow_ids, _ = store_smoke_bundle(folder=SLOW_BUNDLE)
    ids.update(slow_ids)
    ctx = TaskContext(task_id="@test/reference-agent/t", instance_id=run_id, artifacts=artifacts)
    yield ctx, ids
    report = await ctx.teardown.run()
    assert report.failed == ()

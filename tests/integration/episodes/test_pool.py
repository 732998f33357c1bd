"""The env pool against real env servers behind real gateways, in this process (no Docker).

A stand-in ``deploy`` registers a gateway deployment and a sandbox that only counts its
termination, so the pool's decisions (reuse after a reset, or tear down) are seen directly.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import attrs

from agent_env.episodes import turns
from agent_env.episodes.pool import EnvPool
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.steps import Step
from agentenv_protocol import AgentEnvEnvironment, environment_card, get_data, reset_data
from agentenv_protocol import tool as env_tool
from agentenv_protocol.client import McpClient
from agentenv_protocol.testing import serve_env, serve_gateway


@environment_card(name="tally")
class Tally(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.count = 0

    @env_tool(name="bump")
    def bump(self) -> int:
        """Add one."""
        self.count += 1
        return self.count

    @reset_data
    def reset(self) -> None:
        self.count = 0


@environment_card(name="stuck")
class Stuck(AgentEnvEnvironment):
    """Keeps its state: serves no data/reset."""

    def __init__(self) -> None:
        self.count = 0

    @env_tool(name="bump")
    def bump(self) -> int:
        """Add one."""
        self.count += 1
        return self.count


@environment_card(name="ledger")
class Ledger(AgentEnvEnvironment):
    """Says what its state is (``data/get``); with ``leaky``, its reset forgets the notes."""

    leaky = False

    def __init__(self) -> None:
        self.count = 0
        self.notes: list[str] = []

    @env_tool(name="bump")
    def bump(self) -> int:
        """Add one, and note it."""
        self.count += 1
        self.notes.append(f"bumped to {self.count}")
        return self.count

    @reset_data
    def reset(self) -> None:
        self.count = 0
        if not self.leaky:
            self.notes = []

    @get_data
    def state(self) -> list[dict[str, Any]]:
        return [{"kind": "data", "data": {"count": self.count, "notes": self.notes}}]


class LeakyLedger(Ledger):
    leaky = True


@attrs.frozen
class Deployment:
    url: str
    headers: dict[str, str]
    environment_name: str
    token: str
    expires_at: str = "2999-01-01T00:00:00+00:00"


class CountingSandbox:
    provider_name = "fake"
    terminated: ClassVar[list[str]] = []

    def __init__(self, sandbox_id: str) -> None:
        self.id = sandbox_id

    def describe(self) -> dict[str, Any]:
        return {"id": self.id}

    async def terminate(self) -> None:
        CountingSandbox.terminated.append(self.id)


@attrs.define(kw_only=True)
class FakeDeployEnv(Step):
    type = "deploy_env"
    env_id: str


def context(name: str) -> TaskContext:
    return TaskContext(task_id="t", instance_id=f"t-{name}", artifacts=MemoryArtifacts())


@contextlib.asynccontextmanager
async def gateway_over(env: AgentEnvEnvironment) -> AsyncIterator[Deployment]:
    async with serve_env(env) as server, \
            serve_gateway([server.url], call_timeout=5, ready_timeout=10) as gateway:
        yield Deployment(gateway.url, gateway.auth_headers, "env", gateway.token or "")


def deployer(deployment: Deployment) -> Any:
    made: list[int] = []

    async def deploy(step: Step, ctx: TaskContext) -> None:
        made.append(1)
        ctx.add_sandbox("env-x", CountingSandbox(f"box-{len(made)}"))  # type: ignore[arg-type]
        ctx.add_env(step.env_id, deployment)  # type: ignore[attr-defined]
        ctx.outputs[step.id] = {"instance_id": f"x-{len(made)}"}

    return deploy


async def bump(deployment: Deployment) -> int:
    async with McpClient(f"{deployment.url}/mcp", headers=deployment.headers) as client:
        return json.loads((await client.call_tool("bump", {})).text)


async def trajectory(deployment: Deployment) -> list[dict[str, Any]]:
    import aiohttp

    async with aiohttp.ClientSession(headers=deployment.headers) as http, \
            http.get(f"{deployment.url}/trajectory") as resp:
        return [json.loads(line) for line in (await resp.text()).splitlines()]


async def test_an_env_that_serves_reset_is_reset_and_lent_again() -> None:
    CountingSandbox.terminated.clear()
    async with gateway_over(Tally()) as deployment:
        pool = EnvPool("pool-1", {})
        deploy = deployer(deployment)
        first = context("a")
        await pool.lend(FakeDeployEnv(id="d", env_id="@b/x"), first, deploy)
        assert first.envs["@b/x"] is deployment and first.outputs["d"]["reused"] is False
        assert first.sandboxes["env-x"].id == "box-1"
        assert [await bump(deployment) for _ in range(3)] == [1, 2, 3]
        await first.teardown.run()  # gives it back: reset, idle
        assert (pool.idle_count(), CountingSandbox.terminated) == (1, [])
        second = context("b")
        await pool.lend(FakeDeployEnv(id="d", env_id="@b/x"), second, deploy)
        assert second.outputs["d"] == {"instance_id": "x-1", "reused": True}
        assert await bump(deployment) == 1  # nothing of the first episode is left
        # nor in the gateway's trajectory: only the second episode's call is there
        assert [e["type"] for e in await trajectory(deployment)] == [
            "tool_call", "tool_call_result"]
        assert (pool.deploys, pool.reuses) == (1, 1)
        assert second.strip_secrets(deployment.token) == "****"
        await second.teardown.run()
        await pool.close()
        assert CountingSandbox.terminated == ["box-1"]
        assert pool.entries == set()


async def test_an_env_without_reset_is_torn_down_not_lent_again() -> None:
    CountingSandbox.terminated.clear()
    async with gateway_over(Stuck()) as deployment:
        pool = EnvPool("pool-2", {})
        deploy = deployer(deployment)
        for name in ("a", "b"):
            ctx = context(name)
            await pool.lend(FakeDeployEnv(id="d", env_id="@b/x"), ctx, deploy)
            await ctx.teardown.run()
        assert (pool.deploys, pool.reuses, pool.idle_count()) == (2, 0, 0)
        assert CountingSandbox.terminated == ["box-1", "box-2"]


def test_the_turns_role_and_session_names_match_the_protocols() -> None:
    from agentenv_protocol.env import ROLE_META_KEY, SESSION_META_KEY
    from agentenv_protocol.mcp_http import ROLE_HEADER

    assert (turns.ROLE_HEADER, turns.ROLE_META_KEY, turns.SESSION_META_KEY) == (
        ROLE_HEADER, ROLE_META_KEY, SESSION_META_KEY)


async def test_a_reset_that_restores_the_fresh_state_is_verified_and_the_env_lent_again() -> None:
    CountingSandbox.terminated.clear()
    async with gateway_over(Ledger()) as deployment:
        pool = EnvPool("pool-3", {})
        deploy = deployer(deployment)
        for name in ("a", "b", "c"):
            ctx = context(name)
            await pool.lend(FakeDeployEnv(id="d", env_id="@b/x"), ctx, deploy)
            assert await bump(deployment) == 1  # each episode starts fresh
            await ctx.teardown.run()
        assert (pool.deploys, pool.reuses, pool.quarantined) == (1, 2, 0)
        await pool.close()


async def test_a_leaky_reset_is_caught_and_the_env_replaced_not_lent() -> None:
    """Its reset zeroes the counter (a check of the tool alone would pass) but keeps the notes:
    the state digest differs from the fresh one, so the env is quarantined."""
    CountingSandbox.terminated.clear()
    async with gateway_over(LeakyLedger()) as deployment:
        pool = EnvPool("pool-4", {})
        deploy = deployer(deployment)
        first = context("a")
        await pool.lend(FakeDeployEnv(id="d", env_id="@b/x"), first, deploy)
        await bump(deployment)
        await first.teardown.run()
        assert (pool.quarantined, pool.idle_count()) == (1, 0)
        assert CountingSandbox.terminated == ["box-1"]  # torn down, not handed on
        second = context("b")
        await pool.lend(FakeDeployEnv(id="d", env_id="@b/x"), second, deploy)
        assert second.outputs["d"]["reused"] is False  # a fresh deploy, not the leaky env
        assert pool.deploys == 2
        await second.teardown.run()
        await pool.close()

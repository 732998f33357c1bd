"""``sync_env_clock`` and ``modify_env_tool_access`` on a real env server behind a real gateway
(in this process): the server's tool really reads the virtual time the step set, and a disabled
tool really refuses the role it was disabled for while others still call it."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Annotated, Any

import aiohttp
import pytest

from agent_env.api import PreflightView, StepError
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agentenv_mcp_env.control_steps import ApplyServerConfig, ModifyEnvToolAccess, SyncEnvClock
from agentenv_mcp_env.deployment import GatewayDeployment
from agentenv_protocol import (
    AgentEnvEnvironment,
    InjectsFaults,
    McpClient,
    TextPart,
    add_data,
    environment_card,
    extension,
    get_data,
    reset_data,
    tool,
)
from agentenv_protocol.testing import serve_env, serve_gateway


@pytest.fixture(autouse=True)
def _private_state(state_root: Any) -> Any:
    """No Docker here: the env server and the gateway run in this process."""
    return state_root


@environment_card(name="desk")
class DeskEnv(InjectsFaults, AgentEnvEnvironment):
    """Tells the time it is given by the gateway's clock, and files reports."""

    def __init__(self) -> None:
        self.time_url: str | None = None

    @extension("urn:agentenv:clock/v1")
    def sync_time(self, env_get_time_url: str) -> None:
        self.time_url = env_get_time_url

    @tool(name="what_time")
    async def what_time(self) -> str:
        if self.time_url is None:
            return "wall clock"
        async with aiohttp.ClientSession() as http, http.get(self.time_url) as resp:
            return str((await resp.json())["virtual_time"])

    @tool(name="file_report")
    def file_report(self) -> str:
        return "filed"


@environment_card(name="plain")
class PlainEnv(AgentEnvEnvironment):
    @tool(name="ping")
    def ping(self) -> str:
        return "pong"


@pytest.fixture
async def desk() -> AsyncIterator[tuple[TaskContext, Any]]:
    async with serve_env(DeskEnv()) as a, serve_env(PlainEnv()) as b:
        async with serve_gateway([a.url, b.url]) as gw:
            env = GatewayDeployment(env_id="desk", env_version=1, instance_id="desk-1",
                                    environment_name="desk", url=gw.url, token=gw.token,
                                    image="", gateway_image="", created_at="", expires_at="")
            ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
            ctx.add_env("desk", env)
            yield ctx, gw


async def test_the_clock_moves_to_the_time_the_step_set(desk: tuple[TaskContext, Any]) -> None:
    ctx, gw = desk
    step = SyncEnvClock(id="clock", env_id="desk", virtual_time="2026-03-01T09:00:00+01:00",
                        virtual_seconds_per_real_second=0)
    await step.run(ctx)
    assert ctx.outputs["clock"]["synced"] == ["desk"]
    assert ctx.outputs["clock"]["skipped"] == ["plain"]
    async with McpClient(gw.mcp_url) as client:
        told = (await client.call_tool("what_time")).text
    assert dt.datetime.fromisoformat(told) == dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)
    strict = SyncEnvClock(id="strict", env_id="desk", virtual_time="2026-03-01T09:00:00Z",
                          tolerate_missing_sync_time=False)
    with pytest.raises(StepError, match="plain of env desk did not take it"):
        await strict.run(ctx)


async def test_a_disabled_tool_refuses_that_role_only(desk: tuple[TaskContext, Any]) -> None:
    ctx, gw = desk
    await ModifyEnvToolAccess(id="off", env_id="desk", action="disable", role="intern",
                              tools=["file_report"]).run(ctx)
    assert "file_report" in ctx.outputs["off"]["disabled"]
    async with McpClient(gw.mcp_url, headers={"AgentEnv-Role": "intern"}) as intern:
        assert "file_report" not in {t.name for t in await intern.list_tools()}
        refused = await intern.call_tool("file_report")
        assert refused.is_error
    async with McpClient(gw.mcp_url, headers={"AgentEnv-Role": "manager"}) as manager:
        assert (await manager.call_tool("file_report")).text == "filed"
    await ModifyEnvToolAccess(id="on", env_id="desk", action="enable", role="intern",
                              tools=["file_report"]).run(ctx)
    async with McpClient(gw.mcp_url, headers={"AgentEnv-Role": "intern"}) as intern:
        assert (await intern.call_tool("file_report")).text == "filed"
    with pytest.raises(StepError, match="serves no tool 'file_reprot'"):
        await ModifyEnvToolAccess(id="typo", env_id="desk", action="disable", role="intern",
                                  tools=["file_reprot"]).run(ctx)


@pytest.mark.parametrize("step, said", [
    (SyncEnvClock(id="c", env_id="desk", virtual_time="9am"), "must be an RFC 3339 time"),
    (SyncEnvClock(id="c", env_id="desk", virtual_time="2026-03-01T09:00:00"),
     "with its offset"),
    (SyncEnvClock(id="c", env_id="desk", virtual_time="2026-03-01T09:00:00Z",
                  virtual_seconds_per_real_second=-1), "from 0 (frozen) to 86400"),
    (ModifyEnvToolAccess(id="m", env_id="desk", action="hide", role="r", tools=["x"]),
     "action must be one of disable, enable"),
    (ModifyEnvToolAccess(id="m", env_id="desk", action="disable", role=" ", tools=["x"]),
     "role must be a role's name"),
    (ModifyEnvToolAccess(id="m", env_id="desk", action="disable", role="r", tools=[]),
     "tools must be a non-empty list"),
])
def test_bad_keys_are_preflight_problems(step: Any, said: str) -> None:
    problems = step.check(PreflightView(step_ids=frozenset({"c", "m"}),
                                        entities={"envs": frozenset({"desk"})}))
    assert any(said in p for p in problems), problems


SET_ERRORS = "urn:agentenv:set-errors/v1"


async def test_set_errors_makes_a_tool_fail_and_slow(desk: tuple[TaskContext, Any]) -> None:
    """apply_server_config invokes set-errors/v1 (InjectsFaults) on the desk server: the tool
    then fails every call with the code given, after the delay; clear_errors heals it; the
    plain server, which does not advertise it, is skipped when tolerated."""
    import time

    ctx, gw = desk
    await ApplyServerConfig(id="faults", env_id="desk", directives=[
        {"service": "desk", "uri": SET_ERRORS, "method": "set_errors",
         "args": {"tool_name": "file_report", "error_rate": 1.0, "error_type": "unavailable",
                  "delay_seconds": 0.3}}]).run(ctx)
    assert ctx.outputs["faults"]["applied"][0]["answer"]["error_type"] == "unavailable"
    async with McpClient(gw.mcp_url) as client:
        started = time.monotonic()
        failed = await client.call_tool("file_report")
        took = time.monotonic() - started
        assert failed.is_error and "unavailable" in failed.text and took >= 0.3
        assert (await client.call_tool("what_time")).text == "wall clock"  # others are fine
    await ApplyServerConfig(id="heal", env_id="desk", tolerate_unadvertised=True, directives=[
        {"environment": "*", "uri": SET_ERRORS, "method": "clear_errors", "args": {}}]).run(ctx)
    assert ctx.outputs["heal"]["skipped"] == [{"service": "plain", "uri": SET_ERRORS}]
    async with McpClient(gw.mcp_url) as client:
        assert (await client.call_tool("file_report")).text == "filed"
    for directives, said in [
        ([{"service": "plain", "uri": SET_ERRORS, "args": {}}],
         "server 'plain' of env 'desk' does not advertise urn:agentenv:set-errors/v1"),
        ([{"service": "nope", "uri": SET_ERRORS, "args": {}}], "env 'desk' has no server 'nope'"),
        ([{"service": "desk", "uri": SET_ERRORS, "args": {}}],
         "give method, one of clear_errors, set_errors"),
        ([{"service": "desk", "uri": SET_ERRORS, "method": "set_errors",
           "args": {"tool_name": "shred"}}], "no tool 'shred'"),
    ]:
        with pytest.raises(StepError, match=said):
            await ApplyServerConfig(id="bad", env_id="desk", directives=directives).run(ctx)


def test_bad_directives_are_preflight_problems() -> None:
    view = PreflightView(step_ids=frozenset({"a"}), entities={"envs": frozenset({"desk"})})
    for directives, said in [
        ([], "directives must be a non-empty list"),
        ([{"uri": SET_ERRORS}], "needs service"),
        ([{"service": "desk"}], "needs uri"),
        ([{"service": "desk", "uri": SET_ERRORS, "args": [1]}], "args must be an object"),
        ([{"service": "desk", "uri": SET_ERRORS, "target": "x"}], "unknown key(s) target"),
    ]:
        problems = ApplyServerConfig(id="a", env_id="desk", directives=directives).check(view)
        assert any(said in p for p in problems), (directives, problems)


async def test_a_rate_fails_that_share_of_calls() -> None:
    """error_rate 0.5 with the env's roll fixed to 0.2, 0.7, 0.4: fail, pass, fail."""
    rolls = iter([0.2, 0.7, 0.4])

    @environment_card(name="flaky")
    class Flaky(InjectsFaults, AgentEnvEnvironment):
        def agentenv_fault_roll(self) -> float:
            return next(rolls)

        @tool(name="ping")
        def ping(self) -> str:
            return "pong"

    env = Flaky()
    env.set_errors("ping", error_rate=0.5)
    async with serve_env(env) as server, McpClient(server.mcp_url) as client:
        outcomes = [(await client.call_tool("ping")).is_error for _ in range(3)]
    assert outcomes == [True, False, True]


@environment_card(name="notes")
class NotesEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.notes: list[str] = []

    @tool(name="add_note")
    def add_note(self, text: str) -> str:
        self.notes.append(text)
        return f"{len(self.notes)} notes"

    @get_data
    def now(self) -> list:
        return [TextPart(n) for n in self.notes]

    @reset_data
    def forget(self) -> None:
        self.notes = []

    @add_data
    def seed(self, parts: list) -> None:
        self.notes += [p.text for p in parts]


async def test_a_snapshot_loads_back_as_it_was_taken() -> None:
    """snapshot_env saves each server's data/get as a universe (the plain server, which serves
    none, is skipped); after the agent's further change, loading the universe into the env puts
    the state back; the trajectory comes along as metadata."""
    from agent_env.api import LoadedEnvironments, current, seed_environments, stored_artifacts
    from agentenv_mcp_env.control_steps import SnapshotEnv
    from agentenv_mcp_env.deployment import EnvServerRecord

    notes = NotesEnv()
    async with serve_env(notes) as a, serve_env(PlainEnv()) as b:
        async with serve_gateway([a.url, b.url]) as gw:
            env = GatewayDeployment(
                env_id="office", env_version=1, instance_id="office-1",
                environment_name="office", url=gw.url, token=gw.token, image="",
                gateway_image="", created_at="", expires_at="", servers=(
                    EnvServerRecord("notes", 1, "env-notes", "", "notes"),
                    EnvServerRecord("plain", 1, "env-plain", "", "plain")))
            ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
            ctx.add_env("office", env)
            async with McpClient(gw.mcp_url) as client:
                await client.call_tool("add_note", {"text": "keep me"})
            await SnapshotEnv(id="snap", env_id="office", include_env_trajectory=True).run(ctx)
            out = ctx.outputs["snap"]
            assert (out["artifact_id"], out["environments"], out["skipped"]) == (
                "snapshots/t-1/snap", ["notes"], ["plain"])
            async with McpClient(gw.mcp_url) as client:
                await client.call_tool("add_note", {"text": "an agent's change"})
            assert notes.notes == ["keep me", "an agent's change"]
            universe = stored_artifacts().load_now("snapshots/t-1/snap")
            assert b"add_note" in universe.file("metadata/trajectory/trajectory.jsonl").data
            loaded = await seed_environments(env, universe, progress=lambda line: None,
                                             loads=LoadedEnvironments(
                                                 current().document_store))
            assert loaded == ["notes"] and notes.notes == ["keep me"]


async def test_tool_schemas_are_judged_per_tool() -> None:
    """verify_mcp_tool_schema: a tool whose parameter is typed and described passes; one with
    an undescribed parameter, or no description, fails, naming what is missing."""
    from agentenv_mcp_env.steps import VerifyMcpToolSchema

    @environment_card(name="shop")
    class Shop(AgentEnvEnvironment):
        @tool(name="find")
        def find(self, query: Annotated[str, "words the item's name holds"]) -> str:
            """Find an item."""
            return query

        @tool(name="buy")
        def buy(self, item: str, count: int = 1) -> str:
            """Buy an item."""
            return item

    async with serve_env(Shop()) as server, serve_gateway([server.url]) as gw:
        env = GatewayDeployment(env_id="shop", env_version=1, instance_id="shop-1",
                                environment_name="shop", url=gw.url, token=gw.token, image="",
                                gateway_image="", created_at="", expires_at="")
        ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
        ctx.add_env("shop", env)
        await VerifyMcpToolSchema(id="schema", env_id="shop").run(ctx)
    rows = {r.criterion["criterion"]: r for r in ctx.verifications["mcp_tool_schema"].results}
    assert rows["tool find"].result
    assert not rows["tool buy"].result
    assert "parameter 'item' has no description" in rows["tool buy"].justification

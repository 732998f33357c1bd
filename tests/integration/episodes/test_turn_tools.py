"""A turn's tools against real env servers behind real gateways, in this process (no Docker).

Each env gets its own gateway, as ``deploy_env`` gives it one; the turn reaches them the way it
reaches deployed envs (gateway URL plus its token), as the agent's role.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from agent_env.agents import AgentSetup
from agent_env.episodes.turns import Turn
from agent_env.task import EpisodeError
from agentenv_protocol import AgentEnvEnvironment, AgentEnvError, ToolContext, environment_card
from agentenv_protocol import tool as env_tool
from agentenv_protocol.testing import serve_env, serve_gateway


@environment_card(name="items")
class Items(AgentEnvEnvironment):
    @env_tool(name="count")
    def count(self) -> int:
        """How many items."""
        return 3

    @env_tool(name="whoami")
    def whoami(self, context: ToolContext) -> dict:
        """Who called, as the env sees it."""
        return {"role": context.role, "session": context.session}

    @env_tool(name="take")
    def take(self, name: str) -> str:
        """Take an item."""
        raise AgentEnvError("not_found", f"no item {name}")


@environment_card(name="pantry")
class Pantry(AgentEnvEnvironment):
    @env_tool(name="count")
    def count(self) -> int:
        """How many jars."""
        return 9


@attrs.frozen
class Deployment:
    """What a turn reads of a GatewayDeployment."""

    url: str
    headers: dict[str, str]
    environment_name: str


class Desk:
    id = "tasks/t-abcdefgh"
    turn_timeout = None

    def open_turn(self, turn: Turn) -> None:
        pass

    def turn_changed(self, turn: Turn) -> None:
        pass


@contextlib.asynccontextmanager
async def deployed(env: Any, name: str) -> AsyncIterator[Deployment]:
    async with serve_env(env) as server, \
            serve_gateway([server.url], name=name, call_timeout=5, ready_timeout=10) as gateway:
        yield Deployment(gateway.url, gateway.auth_headers, name)


def turn(envs: dict[str, Deployment], role: str | None = "planner") -> Turn:
    setup = AgentSetup("alice", role, "sys", envs)
    return Turn(Desk(), setup, "turn", "Count things.", "sys", 30.0)


async def test_tools_are_called_through_the_gateway_as_the_agents_role() -> None:
    async with deployed(Items(), "items") as items:
        current = turn({"@b/items": items})
        async with current.tools() as tools:
            assert sorted(t["name"] for t in tools.list()) == ["count", "take", "whoami"]
            assert all("inputSchema" in t for t in tools.list())
            who = await tools.call("whoami", {})
            assert json.loads(who["content"][0]["text"]) == {
                "role": "planner", "session": "tasks/t-abcdefgh/alice"}
            failed = await tools.call("take", {"name": "pear"})
            assert failed["isError"] is True
            assert "not_found: no item pear" in failed["content"][0]["text"]
            with pytest.raises(EpisodeError) as caught:
                await tools.call("nope", {"x": 1})
            assert str(caught.value) == ("turn 'turn' offers no tool 'nope'; it offers "
                                         "['count', 'take', 'whoami']")
        assert [c["tool"] for c in current.trajectory] == ["whoami", "take"]
        await current.end(response="3")
        with pytest.raises(EpisodeError, match=r"turn 'turn' of agent 'alice' is over \(ended\)"):
            async with current.tools():
                pass


async def test_a_tool_name_offered_by_two_envs_is_refused() -> None:
    async with deployed(Items(), "items") as items, deployed(Pantry(), "pantry") as pantry:
        current = turn({"@b/items": items, "@b/pantry": pantry})
        with pytest.raises(EpisodeError) as caught:
            async with current.tools():
                pass
        assert str(caught.value) == "tool 'count' is offered by both 'items' and 'pantry'"


async def test_calls_after_the_turn_ended_are_refused() -> None:
    async with deployed(Items(), "items") as items:
        current = turn({"@b/items": items}, role=None)
        async with current.tools() as tools:
            who = await tools.call("whoami", {})
            assert json.loads(who["content"][0]["text"])["role"] is None
            await current.end()
            with pytest.raises(EpisodeError, match="is over"):
                await tools.call("count", {})
        assert current.response == ""

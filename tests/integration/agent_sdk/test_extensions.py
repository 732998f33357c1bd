"""agent-config/v1, mcp-config/v1 and trajectory/v1 over raw HTTP, and what the run sees."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest
from agent_sdk_helpers import EchoAgent, Rpc, Served, StreamAgent

from agentenv_protocol.agent import create_app
from agentenv_protocol.testing import serve_app


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as resp:
        return resp.status, await resp.json()


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as resp:
        return resp.status, await resp.json()


# -- agent-config ----------------------------------------------------------------------------


async def test_config_partial_sets_merge(http: aiohttp.ClientSession, echo: Served,
                                         rpc: Rpc) -> None:
    url = echo.url + "/ext/agent-config"
    assert await get(http, url) == (200, {"config": {}})
    assert await post(http, url, {"model": "m1", "api_key": "sk-secret"}) == (
        200, {"status": "updated"})
    assert await post(http, url, {"max_turns": 9, "role": "solver"}) == (
        200, {"status": "updated"})
    status, body = await get(http, url)
    assert status == 200
    assert body == {"config": {"model": "m1", "api_key": "***", "max_turns": 9,
                               "role": "solver"}}
    await rpc.send("hello")
    seen = echo.agent.turns[-1].config
    assert (seen.model, seen.api_key, seen.max_turns, seen.role) == ("m1", "sk-secret", 9,
                                                                      "solver")
    assert seen.timeout_seconds == 600  # the base field's default


async def test_a_name_and_description_set_are_the_cards(http: aiohttp.ClientSession,
                                                         echo: Served) -> None:
    card_url = echo.url + "/.well-known/agent-card.json"
    status, before = await get(http, card_url)
    assert status == 200
    assert await post(http, echo.url + "/ext/agent-config",
                      {"name": "triage-bot", "description": "Sorts the inbox."}) == (
        200, {"status": "updated"})
    _, after = await get(http, card_url)
    assert (after["name"], after["description"]) == ("triage-bot", "Sorts the inbox.")
    assert after["version"] == before["version"]  # the rest of the card is as it was
    await post(http, echo.url + "/ext/agent-config", {"role": "solver"})
    _, still = await get(http, card_url)
    assert still["name"] == "triage-bot"  # a later set of other fields keeps it


async def test_config_refusals(http: aiohttp.ClientSession, echo: Served) -> None:
    url = echo.url + "/ext/agent-config"
    status, body = await post(http, url, {"model": "ok", "temperature": 0.2})
    assert status == 400
    assert "temperature" in body["error"]["message"]
    status, body = await post(http, url, {"max_turns": "many"})
    assert status == 400
    assert "max_turns" in body["error"]["message"]
    status, _ = await post(http, url, ["model"])
    assert status == 400
    async with http.post(url, data=b"{oops") as resp:
        assert resp.status == 400
    # Issue 31, class 17: a duration must be a positive, finite number
    status, body = await post(http, url, {"timeout_seconds": -1})
    assert status == 400 and "timeout_seconds" in body["error"]["message"]
    for raw in (b'{"timeout_seconds": 1e400}', b'{"timeout_seconds": Infinity}',
                b'{"timeout_seconds": NaN}'):
        async with http.post(url, data=raw,
                             headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 400, raw
            assert "finite" in (await resp.json())["error"]["message"]
    # nothing of the refused sets stuck
    assert await get(http, url) == (200, {"config": {}})


async def test_config_timeout_fails_the_turn(http: aiohttp.ClientSession, echo: Served,
                                             rpc: Rpc) -> None:
    await post(http, echo.url + "/ext/agent-config", {"timeout_seconds": 0.3})
    task = await rpc.send("sleep:10")
    assert task["status"]["state"] == "failed"
    data = next(p["data"] for p in task["status"]["message"]["parts"] if p["kind"] == "data")
    assert data["error_code"] == "framework.timeout"


# -- mcp-config ------------------------------------------------------------------------------


async def test_mcp_add_list_and_run_sees_headers(http: aiohttp.ClientSession, echo: Served,
                                                 rpc: Rpc) -> None:
    url = echo.url + "/ext/mcp-config"
    assert await get(http, url) == (200, {"mcp_servers": {}})
    status, body = await post(http, url, {"url": "http://env-a:8080/mcp", "name": "env_a",
                                          "headers": {"AgentEnv-Role": "solver"}})
    assert (status, body) == (200, {"status": "added", "name": "env_a",
                                    "url": "http://env-a:8080/mcp"})
    status, body = await post(http, url, {"url": "http://env-b:8080/mcp"})
    assert status == 200 and body["status"] == "added"
    generated = body["name"]
    assert re.fullmatch(r"mcp_[0-9a-f]{8}", generated)
    assert await get(http, url) == (200, {"mcp_servers": {
        "env_a": {"url": "http://env-a:8080/mcp", "has_headers": True},
        generated: {"url": "http://env-b:8080/mcp", "has_headers": False}}})
    await rpc.send("use tools")
    seen = echo.agent.turns[-1].mcp_servers
    assert set(seen) == {"env_a", generated}
    assert seen["env_a"].url == "http://env-a:8080/mcp"
    assert dict(seen["env_a"].headers) == {"AgentEnv-Role": "solver"}


async def test_mcp_duplicates_conflict(http: aiohttp.ClientSession, echo: Served) -> None:
    url = echo.url + "/ext/mcp-config"
    assert (await post(http, url, {"url": "http://a/mcp", "name": "a"}))[0] == 200
    status, body = await post(http, url, {"url": "http://a/mcp", "name": "other"})
    assert status == 409, body
    status, body = await post(http, url, {"url": "http://elsewhere/mcp", "name": "a"})
    assert status == 409, body
    assert list((await get(http, url))[1]["mcp_servers"]) == ["a"]


async def test_mcp_bad_bodies(http: aiohttp.ClientSession, echo: Served) -> None:
    url = echo.url + "/ext/mcp-config"
    for body in ({}, {"url": 5}, {"url": "http://x/mcp", "extra": 1},
                 {"url": "http://x/mcp", "headers": {"a": 1}}, {"url": "ftp://x"}):
        status, _ = await post(http, url, body)
        assert status == 400, body


# -- trajectory ------------------------------------------------------------------------------


async def test_trajectory_inline_and_cursor_pages(http: aiohttp.ClientSession, echo: Served,
                                                  rpc: Rpc) -> None:
    url = echo.url + "/ext/trajectory"
    task = await rpc.send("events:2500", context_id="ctx-traj")
    status, body = await post(http, url, {"task_id": task["id"]})
    assert status == 200
    events = body["trajectory"]
    assert events[0] == {"type": "prompt", "text": "events:2500"}
    assert events[1:] == [{"type": "step", "i": i} for i in range(2500)]

    status, page = await post(http, url, {"task_id": task["id"], "after": 0})
    assert status == 200
    assert set(page) == {"context_id", "task_id", "state", "format", "events", "next",
                         "has_more"}
    assert (page["context_id"], page["task_id"], page["state"], page["format"]) == (
        "ctx-traj", task["id"], "completed", "echo-events/1")
    assert len(page["events"]) == 1000 and page["next"] == 1000 and page["has_more"]

    got: list[Any] = []
    after = 0
    while True:
        status, page = await post(http, url, {"task_id": task["id"], "after": after,
                                              "limit": 700})
        assert status == 200
        assert len(page["events"]) <= 700
        got.extend(page["events"])
        assert page["next"] == after + len(page["events"])
        after = page["next"]
        if not page["has_more"]:
            break
    assert got == events
    # reading at the end is an empty page, past it a 400
    status, page = await post(http, url, {"task_id": task["id"], "after": len(events)})
    assert (status, page["events"], page["has_more"]) == (200, [], False)
    status, _ = await post(http, url, {"task_id": task["id"], "after": len(events) + 1})
    assert status == 400


async def test_trajectory_by_context_spans_turns(http: aiohttp.ClientSession, echo: Served,
                                                 rpc: Rpc) -> None:
    url = echo.url + "/ext/trajectory"
    first = await rpc.send("events:1", context_id="ctx-two")
    second = await rpc.send("events:2", context_id="ctx-two")
    status, body = await post(http, url, {"context_id": "ctx-two"})
    assert status == 200
    assert len(body["trajectory"]) == 2 + 3
    status, page = await post(http, url, {"context_id": "ctx-two", "after": 2, "limit": 2})
    assert status == 200
    assert page["events"] == [{"type": "prompt", "text": "events:2"}, {"type": "step", "i": 0}]
    assert page["task_id"] == second["id"] and page["has_more"] is True
    _, only_first = await post(http, url, {"task_id": first["id"]})
    assert len(only_first["trajectory"]) == 2


async def test_trajectory_refusals(http: aiohttp.ClientSession, echo: Served,
                                   rpc: Rpc) -> None:
    url = echo.url + "/ext/trajectory"
    task = await rpc.send("x")
    assert (await post(http, url, {"task_id": "unknown"}))[0] == 404
    assert (await post(http, url, {"context_id": "unknown", "after": 0}))[0] == 404
    for body in ({}, {"task_id": task["id"], "context_id": task["contextId"]},
                 {"task_id": task["id"], "after": 0, "limit": 0},
                 {"task_id": task["id"], "after": 0, "limit": 1001},
                 {"task_id": task["id"], "after": -1},
                 {"task_id": task["id"], "after": "0"},
                 {"task_id": task["id"], "bogus": True}):
        status, _ = await post(http, url, body)
        assert status == 400, body


async def test_trajectory_live_while_running(http: aiohttp.ClientSession, echo: Served,
                                             rpc: Rpc) -> None:
    task = await rpc.send("sleep:0.5", blocking=False)
    status, page = await post(http, echo.url + "/ext/trajectory",
                              {"task_id": task["id"], "after": 0})
    assert status == 200 and page["state"] in ("pending", "running")
    await rpc.wait(task["id"])
    _, page = await post(http, echo.url + "/ext/trajectory", {"task_id": task["id"], "after": 0})
    assert page["state"] == "completed" and page["events"][0]["type"] == "prompt"


async def test_trajectory_lru_keeps_running_contexts(http: aiohttp.ClientSession) -> None:
    agent = EchoAgent()
    async with serve_app(create_app(agent, max_contexts=3)) as server:
        rpc = Rpc(http, server.url)
        url = server.url + "/ext/trajectory"
        running = await rpc.send("sleep:2", context_id="long", blocking=False)
        done = [await rpc.send("x", context_id=f"c{i}") for i in range(4)]
        # c0 and c1 were evicted (least recently used), the running context was not
        assert (await post(http, url, {"task_id": done[0]["id"]}))[0] == 404
        assert (await post(http, url, {"task_id": done[1]["id"]}))[0] == 404
        for task in done[2:]:
            assert (await post(http, url, {"task_id": task["id"]}))[0] == 200
        assert (await post(http, url, {"task_id": running["id"]}))[0] == 200
        await rpc.wait(running["id"])
        _, body = await post(http, url, {"task_id": running["id"]})
        assert body["trajectory"] == [{"type": "prompt", "text": "sleep:2"}]


# -- which extensions a card shows -----------------------------------------------------------


async def test_extensions_only_when_listed(http: aiohttp.ClientSession) -> None:
    async with serve_app(create_app(StreamAgent())) as server:
        _, card = await get(http, server.url + "/.well-known/agent-card.json")
        assert card["capabilities"]["extensions"] == []
        for path in ("/ext/agent-config", "/ext/mcp-config"):
            async with http.get(server.url + path) as resp:
                assert resp.status == 404
        async with http.post(server.url + "/ext/trajectory", json={"task_id": "x"}) as resp:
            assert resp.status == 404


@pytest.mark.parametrize("short", [True, False])
async def test_short_extension_names(http: aiohttp.ClientSession, short: bool) -> None:
    from agentenv_protocol.agent import (
        TRAJECTORY_V1,
        AgentEnvAgent,
        AgentIdentity,
        TaskRequest,
        TaskResult,
        a2a_agent,
    )

    @a2a_agent(identity=AgentIdentity(name="t"),
               extensions=("trajectory",) if short else (TRAJECTORY_V1,))
    class OnlyTrajectory(AgentEnvAgent):
        async def run(self, request: TaskRequest[Any]) -> TaskResult:
            return TaskResult(text="ok")

    async with serve_app(create_app(OnlyTrajectory())) as server:
        _, card = await get(http, server.url + "/.well-known/agent.json")
        assert [e["uri"] for e in card["capabilities"]["extensions"]] == [TRAJECTORY_V1]

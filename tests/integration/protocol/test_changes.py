"""changes/v1: an env's changelog over real servers, directly and through the gateway."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import aiohttp
import pytest

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.client import DataPlaneClient, McpClient
from agentenv_protocol.env import reset_data
from agentenv_protocol.testing import serve_env, serve_gateway


@environment_card(name="ledger", changelog=True)
class LedgerEnv(AgentEnvEnvironment):
    """Rows in memory: writes are changes, reads are not."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}

    @tool(name="put")
    def put(self, key: str, value: int) -> str:
        self.rows[key] = value
        self.record_change("row_written", key=key, value=value)
        return "ok"

    @tool(name="get")
    def get(self, key: str) -> int:
        return self.rows.get(key, 0)

    @tool(name="put_many")
    def put_many(self, count: int) -> int:
        for i in range(count):
            self.rows[f"k{i}"] = i
            self.record_change("row_written", key=f"k{i}", value=i)
        return count

    @tool(name="stamp")
    def stamp(self) -> str:
        self.record_change("stamped", at=dt.datetime(2026, 12, 4, tzinfo=dt.UTC), tags={"a"})
        return "ok"

    @reset_data
    def reset(self) -> None:
        self.rows.clear()


@environment_card(name="plain")
class PlainEnv(AgentEnvEnvironment):
    @tool(name="touch")
    def touch(self) -> str:
        self.record_change("touched")
        return "never"


async def _changes(base: str, query: str = "", headers: dict[str, str] | None = None
                   ) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, \
            http.get(f"{base}/changes{query}", headers=headers or {}) as resp:
        return resp.status, await resp.json()


async def test_changes_page_by_cursor_and_stamp_each_call() -> None:
    async with serve_env(LedgerEnv()) as server, McpClient(server.mcp_url) as mcp:
        first = await mcp.call_tool_raw("put", {"key": "a", "value": 1})
        assert first["_meta"]["agentenv.io/changelog"] == {"before": 0, "after": 1}
        read = await mcp.call_tool_raw("get", {"key": "a"})
        assert read["_meta"]["agentenv.io/changelog"] == {"before": 1, "after": 1}  # no change
        await mcp.call_tool_raw("put_many", {"count": 5})
        status, body = await _changes(server.url, "?after_id=0&limit=4")
        assert status == 200 and body["has_more"] is True
        assert [c["id"] for c in body["changes"]] == [1, 2, 3, 4]
        assert body["changes"][0]["kind"] == "row_written"
        assert body["changes"][0]["data"] == {"key": "a", "value": 1}
        assert body["changes"][0]["tool"] == "put" and body["changes"][1]["tool"] == "put_many"
        status, body = await _changes(server.url, "?after_id=4&limit=4")
        assert [c["id"] for c in body["changes"]] == [5, 6] and body["has_more"] is False
        status, body = await _changes(server.url, "?after_id=6")
        assert (status, body) == (200, {"changes": [], "has_more": False})  # nothing new yet
        await mcp.call_tool_raw("stamp", {})  # values JSON cannot hold are turned on record
        status, body = await _changes(server.url, "?after_id=6")
        assert body["changes"][0]["data"] == {"at": "2026-12-04T00:00:00+00:00", "tags": ["a"]}


async def test_bad_queries_are_400_and_a_reset_empties_the_log_keeping_ids() -> None:
    async with serve_env(LedgerEnv()) as server, McpClient(server.mcp_url) as mcp:
        await mcp.call_tool_raw("put_many", {"count": 3})
        for query, word in (("?limit=0", "limit"), ("?limit=10001", "limit"),
                            ("?after_id=-1", "after_id"), ("?after_id=x", "after_id")):
            status, body = await _changes(server.url, query)
            assert status == 400, query
            assert body["error"]["code"] == "invalid_params" and word in body["error"]["message"]
        async with DataPlaneClient(server.url) as data:
            await data.reset()
        status, body = await _changes(server.url)
        assert body == {"changes": [], "has_more": False}
        result = await mcp.call_tool_raw("put", {"key": "b", "value": 2})
        assert result["_meta"]["agentenv.io/changelog"] == {"before": 3, "after": 4}
        status, body = await _changes(server.url, "?after_id=0")
        assert [c["id"] for c in body["changes"]] == [4]  # only the new episode's change


async def test_evicted_cursor_is_410() -> None:
    env = LedgerEnv()
    env.agentenv_changelog._changes = type(env.agentenv_changelog._changes)(maxlen=3)
    async with serve_env(env) as server, McpClient(server.mcp_url) as mcp:
        await mcp.call_tool_raw("put_many", {"count": 5})
        status, body = await _changes(server.url, "?after_id=1")
        assert status == 410 and body["error"]["code"] == "changes_evicted"
        assert "after_id=2" in body["error"]["message"]
        status, body = await _changes(server.url, "?after_id=2")
        assert [c["id"] for c in body["changes"]] == [3, 4, 5]


async def test_card_and_gateway_trajectory_carry_the_changelog() -> None:
    async with serve_env(LedgerEnv()) as server, \
            serve_gateway([server.url], call_timeout=5, ready_timeout=10) as gateway:
        async with aiohttp.ClientSession() as http, \
                http.get(f"{server.url}/.well-known/agent-env.json") as resp:
            card = await resp.json()
        uris = [e["uri"] for e in card["capabilities"]["extensions"]]
        assert "urn:agentenv:changes/v1" in uris
        async with McpClient(gateway.mcp_url) as mcp:
            await mcp.call_tool_raw("put", {"key": "a", "value": 1})
            await mcp.call_tool_raw("get", {"key": "a"})
        async with aiohttp.ClientSession() as http, \
                http.get(gateway.url_for("/trajectory")) as resp:
            events = [json.loads(line) for line in (await resp.text()).splitlines()]
        results = [e for e in events if e["type"] == "tool_call_result"]
        assert [(e["tool"], e["changelog_id_before"], e["changelog_id"]) for e in results] == [
            ("put", 0, 1), ("get", 1, 1)]
        # the child's changes through the gateway's pass-through, as its card there says
        async with aiohttp.ClientSession() as http, \
                http.get(gateway.url_for("/.well-known/agent-env.json")) as resp:
            child = (await resp.json())["children_environments"][0]
        ext = next(e for e in child["capabilities"]["extensions"]
                   if e["uri"] == "urn:agentenv:changes/v1")
        endpoint = ext["params"]["methods"]["list"]["endpoint"]
        assert endpoint.endswith("/changes") and "/env/" in endpoint
        status, body = await _changes(gateway.url + endpoint.removesuffix("/changes"),
                                      headers=gateway.auth_headers)
        assert status == 200 and [c["id"] for c in body["changes"]] == [1]


def test_record_change_needs_the_card_flag_and_unknown_card_keys_still_raise() -> None:
    with pytest.raises(RuntimeError, match=r"environment_card\(changelog=True\)"):
        PlainEnv().record_change("touched")
    assert "urn:agentenv:changes/v1" not in json.dumps(PlainEnv().agentenv_card())
    with pytest.raises(TypeError, match="unknown field"):
        environment_card(name="x", change_log=True)

"""Raw HTTP against ``/a2a``, ``/health`` and the card: exact shapes and error codes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from agent_sdk_helpers import Rpc, Served, reply_data


async def test_health_and_card_paths(http: aiohttp.ClientSession, echo: Served) -> None:
    async with http.get(echo.url + "/health") as resp:
        assert resp.status == 200
        assert await resp.json() == {"status": "ok"}
    cards = []
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        async with http.get(echo.url + path) as resp:
            assert resp.status == 200
            assert resp.content_type == "application/json"
            cards.append(await resp.json())
    card = cards[0]
    assert cards[1] == card
    assert {k: card[k] for k in ("name", "version", "url", "protocolVersion",
                                 "preferredTransport")} == {
        "name": "echo", "version": "1.2.3", "url": "/a2a", "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC"}
    caps = card["capabilities"]
    assert (caps["streaming"], caps["pushNotifications"], caps["stateTransitionHistory"]) == (
        False, False, False)
    config = next(e for e in caps["extensions"] if e["uri"] == "urn:agentenv:agent-config/v1")
    assert config["params"]["endpoint"] == "/ext/agent-config"
    assert config["params"]["methods"]["set"]["request"]["supported"] == [
        "name", "description", "role", "timeout_seconds", "model", "max_turns", "api_key"]
    mcp = next(e for e in caps["extensions"] if e["uri"] == "urn:agentenv:mcp-config/v1")
    assert "headers" in mcp["params"]["methods"]["add"]["request"]["optional"]


async def test_task_shape(rpc: Rpc) -> None:
    task = await rpc.send("hi", context_id="ctx-shape")
    assert task["kind"] == "task"
    assert task["contextId"] == "ctx-shape"
    assert task["status"]["state"] == "completed"
    assert task["status"]["timestamp"]
    msg = task["status"]["message"]
    assert msg["kind"] == "message" and msg["role"] == "agent"
    assert msg["taskId"] == task["id"] and msg["contextId"] == "ctx-shape"
    assert msg["messageId"]
    assert task["history"][0]["parts"] == [{"kind": "text", "text": "hi"}]
    assert task["history"][0]["role"] == "user"
    got = (await rpc.call("tasks/get", {"id": task["id"]}))["result"]
    assert got == task
    short = (await rpc.call("tasks/get", {"id": task["id"], "historyLength": 0}))["result"]
    assert short["history"] == []


async def test_parse_error_has_null_id(http: aiohttp.ClientSession, echo: Served) -> None:
    async with http.post(echo.url + "/a2a", data=b"{not json",
                         headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body["id"] is None
    assert body["error"]["code"] == -32700


async def test_deeply_nested_json_is_a_parse_error_not_a_500(
        http: aiohttp.ClientSession, echo: Served) -> None:
    """Issue 31, class 16: 50k-deep JSON made the A2A server (and its extensions) fail with a
    500 (RecursionError); it is refused as any bad body is."""
    deep = b"[" * 50_000 + b"]" * 50_000
    for depth in (deep, b"[" * 150 + b"]" * 150):
        async with http.post(echo.url + "/a2a", data=depth,
                             headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
            body = await resp.json()
        assert body["error"]["code"] == -32700 and "nested deeper" in body["error"]["message"]
    async with http.post(echo.url + "/ext/agent-config", data=deep,
                         headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 400
        assert "nested deeper" in (await resp.json())["error"]["message"]


async def test_invalid_request(http: aiohttp.ClientSession, echo: Served) -> None:
    for payload in ([1, 2], {"id": 4, "method": "tasks/get"}, {"jsonrpc": "2.0", "id": 5}):
        async with http.post(echo.url + "/a2a", json=payload) as resp:
            body = await resp.json()
        assert body["error"]["code"] == -32600, payload


async def test_unknown_method(rpc: Rpc) -> None:
    out = await rpc.call("tasks/explode", {})
    assert out["error"]["code"] == -32601
    assert out["id"] == rpc._id
    # 1.x method names are unknown to a 0.3 server
    assert (await rpc.call("SendMessage", {}))["error"]["code"] == -32601


async def test_invalid_params(rpc: Rpc) -> None:
    bad: list[Any] = [
        {},  # no message
        {"message": {"messageId": 5, "role": "user", "parts": [{"kind": "text", "text": "x"}]}},
        {"message": {"messageId": "m", "role": "user", "parts": [{"kind": "nope"}]}},
        {"message": {"messageId": "m", "role": "user", "parts": []}},
        {"message": {"messageId": "m", "role": "agent",
                     "parts": [{"kind": "text", "text": "x"}]}},
        {"message": {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]},
         "configuration": {"blocking": "no"}},
    ]
    for params in bad:
        out = await rpc.call("message/send", params)
        assert out["error"]["code"] == -32602, (params, out)
    assert (await rpc.call("tasks/get", {}))["error"]["code"] == -32602
    assert (await rpc.call("tasks/get", [1]))["error"]["code"] == -32602
    assert (await rpc.call("tasks/get", {"id": 7}))["error"]["code"] == -32602


async def test_unknown_task(rpc: Rpc) -> None:
    assert (await rpc.call("tasks/get", {"id": "nope"}))["error"]["code"] == -32001
    assert (await rpc.call("tasks/cancel", {"id": "nope"}))["error"]["code"] == -32001
    out = await rpc.call("message/send", {"message": {
        "messageId": "m", "role": "user", "taskId": "nope",
        "parts": [{"kind": "text", "text": "x"}]}})
    assert out["error"]["code"] == -32001


async def test_cancel_of_a_finished_task(rpc: Rpc) -> None:
    task = await rpc.send("done")
    out = await rpc.call("tasks/cancel", {"id": task["id"]})
    assert out["error"]["code"] == -32002
    assert (await rpc.call("tasks/get", {"id": task["id"]}))["result"]["status"][
        "state"] == "completed"


async def test_cancel_running_and_queued(rpc: Rpc, echo: Served) -> None:
    """The running turn is cancelled for real; a turn queued behind it never starts."""
    running = await rpc.send("sleep:30", context_id="ctx-cancel", blocking=False)
    queued = await rpc.send("after", context_id="ctx-cancel", blocking=False)
    for _ in range(100):
        if echo.agent.turns:
            break
        await asyncio.sleep(0.02)
    out = (await rpc.call("tasks/cancel", {"id": queued["id"]}))["result"]
    assert out["status"]["state"] == "canceled"
    out = (await rpc.call("tasks/cancel", {"id": running["id"]}))["result"]
    assert out["status"]["state"] == "canceled"
    assert echo.agent.turns[0].cancelled
    await asyncio.sleep(0.2)
    assert [t.text for t in echo.agent.turns] == ["sleep:30"], "the queued turn ran"
    again = await rpc.call("tasks/cancel", {"id": running["id"]})
    assert again["error"]["code"] == -32002


async def test_stream_refused_by_a_non_streaming_agent(rpc: Rpc) -> None:
    params = {"message": {"messageId": "m", "role": "user",
                          "parts": [{"kind": "text", "text": "x"}]}}
    out = await rpc.call("message/stream", params)
    assert out["error"]["code"] == -32004
    assert (await rpc.call("tasks/resubscribe", {"id": "x"}))["error"]["code"] == -32004


async def test_unsupported_a2a_methods(rpc: Rpc) -> None:
    out = await rpc.call("tasks/pushNotificationConfig/set", {"taskId": "x"})
    assert out["error"]["code"] == -32003


async def test_raw_stream_events(http: aiohttp.ClientSession, streamer: Served) -> None:
    body = {"jsonrpc": "2.0", "id": "s1", "method": "message/stream",
            "params": {"message": {"messageId": "m", "role": "user", "contextId": "c1",
                                   "parts": [{"kind": "text", "text": "raw"}]}}}
    async with http.post(streamer.url + "/a2a", json=body) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/event-stream"
        raw = await resp.text()

    events = [json.loads(chunk.removeprefix("data: "))
              for chunk in raw.strip().split("\n\n")]
    assert all(e["jsonrpc"] == "2.0" and e["id"] == "s1" for e in events)
    results = [e["result"] for e in events]
    assert results[0]["kind"] == "task" and results[0]["status"]["state"] == "submitted"
    kinds = [r["kind"] for r in results[1:]]
    assert set(kinds) == {"status-update", "artifact-update"}
    finals = [r.get("final") for r in results if r["kind"] == "status-update"]
    assert finals[-1] is True and not any(finals[:-1])
    last = results[-1]
    assert last["status"]["state"] == "completed"
    assert reply_data({"status": last["status"]})["error_type"] is None

    # a later resubscribe to the settled task gets the snapshot and the final event
    task_id = results[0]["id"]
    body = {"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": task_id}}
    async with http.post(streamer.url + "/a2a", json=body) as resp:
        raw = await resp.text()
    again = [json.loads(c.removeprefix("data: "))["result"] for c in raw.strip().split("\n\n")]
    assert again[0]["kind"] == "task" and again[-1]["final"] is True

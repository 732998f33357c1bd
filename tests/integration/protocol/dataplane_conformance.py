"""Data-plane conformance (protocol.md sections 2 and 3), reusable against any env server.

Each ``check_*`` is an async function taking the env's base URL (and optional headers, e.g. a
gateway's bearer token) and asserting one row of the contract. ``CHECKS`` lists them all;
``run_all(base_url)`` runs them in order. Nothing here depends on our server's code.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

CARD_KEYS = {"name", "protocolVersion", "url", "preferredTransport", "additionalInterfaces",
             "capabilities", "children_environments"}
OPERATIONS = {"data/reset", "data/add", "data/get"}


async def _card(base: str, headers: Mapping[str, str] | None) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(
            base + "/.well-known/agent-env.json", headers=headers) as resp:
        assert resp.status == 200
        return await resp.json(content_type=None)


async def _post(base: str, body: Any, headers: Mapping[str, str] | None,
                path: str = "/agentenv") -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body)
    async with aiohttp.ClientSession() as http, http.post(
            base + path, data=data,
            headers={"Content-Type": "application/json", **(headers or {})}) as resp:
        assert resp.status == 200, f"data plane must answer HTTP 200, got {resp.status}"
        return json.loads(await resp.read())


async def _dataplane_path(base: str, headers: Mapping[str, str] | None) -> tuple[str, set[str]]:
    card = await _card(base, headers)
    ops = card["capabilities"].get("operations")
    return card.get("url") or "/agentenv", OPERATIONS if ops is None else set(ops)


def _error(reply: dict[str, Any], code: int) -> dict[str, Any]:
    assert reply.get("jsonrpc") == "2.0"
    assert "error" in reply, reply
    assert reply["error"]["code"] == code, reply
    return reply["error"]


async def check_card_shape(base: str, headers: Mapping[str, str] | None = None) -> None:
    card = await _card(base, headers)
    assert CARD_KEYS <= set(card), f"missing card keys: {CARD_KEYS - set(card)}"
    assert card["protocolVersion"] == "1.0"
    assert card["preferredTransport"] == "JSONRPC"
    assert isinstance(card["name"], str) and card["name"]
    assert any(i["transport"] == "mcp" for i in card["additionalInterfaces"])
    caps = card["capabilities"]
    for key in ("extensions", "tools", "operations"):
        assert key in caps, f"capabilities.{key} must be present (null allowed)"
    assert set(caps["operations"] or []) <= OPERATIONS
    for t in caps["tools"] or []:
        assert {"name", "description", "inputSchema"} <= set(t)


async def check_parse_error(base: str, headers: Mapping[str, str] | None = None) -> None:
    path, _ = await _dataplane_path(base, headers)
    reply = await _post(base, b"{not json", headers, path)
    assert _error(reply, -32700)["message"] == "parse error"
    assert reply["id"] is None


async def check_invalid_requests(base: str, headers: Mapping[str, str] | None = None) -> None:
    path, _ = await _dataplane_path(base, headers)
    bad: list[Any] = [
        [],  # an empty batch
        "a string",
        42,
        {"id": 1, "method": "data/reset"},  # no jsonrpc
        {"jsonrpc": "1.0", "id": 1, "method": "data/reset"},
        {"jsonrpc": "2.0", "id": 1},  # no method
    ]
    for body in bad:
        reply = await _post(base, body, headers, path)
        assert _error(reply, -32600)["message"] == "invalid request", body


async def check_method_not_found(base: str, headers: Mapping[str, str] | None = None) -> None:
    path, _ = await _dataplane_path(base, headers)
    reply = await _post(base, {"jsonrpc": "2.0", "id": 7, "method": "data/nope"}, headers, path)
    assert _error(reply, -32601)["message"] == "method not found: data/nope"
    assert reply["id"] == 7


async def check_operations_true_to_handlers(base: str,
                                            headers: Mapping[str, str] | None = None) -> None:
    """A validator's probe: ``data/add`` with empty parts is -32602 iff add is served."""
    path, ops = await _dataplane_path(base, headers)
    reply = await _post(base, {"jsonrpc": "2.0", "id": 1, "method": "data/add",
                               "params": {"parts": []}}, headers, path)
    if "data/add" in ops:
        err = _error(reply, -32602)
        assert err["message"] == "invalid_request"
        assert isinstance(err["data"]["detail"], str)
    else:
        _error(reply, -32601)
    for op in OPERATIONS - ops:
        _error(await _post(base, {"jsonrpc": "2.0", "id": 2, "method": op, "params": {}},
                           headers, path), -32601)


async def check_bad_parts(base: str, headers: Mapping[str, str] | None = None) -> None:
    path, ops = await _dataplane_path(base, headers)
    if "data/add" not in ops:
        return
    for params in ({}, {"parts": "x"}, {"parts": [{"kind": "video"}]},
                   {"parts": [{"kind": "text"}]}, {"parts": [{"kind": "file", "file": {}}]},
                   {"parts": [{"kind": "data", "data": 3}]}):
        reply = await _post(base, {"jsonrpc": "2.0", "id": 1, "method": "data/add",
                                   "params": params}, headers, path)
        assert _error(reply, -32602)["message"] == "invalid_request", params


async def check_round_trip(base: str, headers: Mapping[str, str] | None = None) -> None:
    """reset -> {}, add every part kind -> {}, get -> parts in A2A shape with nulls omitted."""
    path, ops = await _dataplane_path(base, headers)
    if "data/reset" in ops:
        reply = await _post(base, {"jsonrpc": "2.0", "id": 1, "method": "data/reset"},
                            headers, path)
        assert reply == {"jsonrpc": "2.0", "id": 1, "result": {}}
    if "data/add" in ops:
        parts = [
            {"kind": "text", "text": "hello", "metadata": {"k": 1}},
            {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a"}},
            {"kind": "file", "file": {"uri": "https://example.com/x.txt"}},
            {"kind": "data", "data": {"n": 1}},
        ]
        reply = await _post(base, {"jsonrpc": "2.0", "id": 2, "method": "data/add",
                                   "params": {"parts": parts}}, headers, path)
        assert reply == {"jsonrpc": "2.0", "id": 2, "result": {}}
    if "data/get" in ops:
        reply = await _post(base, {"jsonrpc": "2.0", "id": 3, "method": "data/get",
                                   "params": {}}, headers, path)
        got = reply["result"]["parts"]
        assert isinstance(got, list)
        for part in got:
            assert part["kind"] in ("text", "file", "data")
            assert None not in part.values()
            if part["kind"] == "file":
                assert None not in part["file"].values()


async def check_batches(base: str, headers: Mapping[str, str] | None = None) -> None:
    """Beyond the reference (which refuses batches): a batch runs in order, answers requests in
    an array in that order, skips notifications, and a bad member is its own error."""
    path, ops = await _dataplane_path(base, headers)
    if "data/reset" not in ops:
        return
    batch: list[Any] = [{"jsonrpc": "2.0", "id": "r", "method": "data/reset"},
                        {"jsonrpc": "2.0", "method": "data/reset"},  # a notification
                        {"jsonrpc": "2.0", "id": 9, "method": "data/nope"},
                        7]
    if "data/add" in ops and "data/get" in ops:
        batch += [{"jsonrpc": "2.0", "id": "a", "method": "data/add",
                   "params": {"parts": [{"kind": "text", "text": "batched"}]}},
                  {"jsonrpc": "2.0", "id": "g", "method": "data/get", "params": {}}]
    replies: Any = await _post(base, batch, headers, path)
    assert isinstance(replies, list), replies
    assert [r["id"] for r in replies] == ["r", 9, None, *(["a", "g"] if len(batch) > 4 else [])]
    assert replies[0] == {"jsonrpc": "2.0", "id": "r", "result": {}}
    assert _error(replies[1], -32601)["message"] == "method not found: data/nope"
    assert _error(replies[2], -32600)["message"] == "invalid request"
    if len(batch) > 4:  # the get saw the add before it: in order
        assert replies[3] == {"jsonrpc": "2.0", "id": "a", "result": {}}
        assert "batched" in json.dumps(replies[4]["result"]["parts"])
    data = json.dumps([{"jsonrpc": "2.0", "method": "data/reset"}])
    async with aiohttp.ClientSession() as http, http.post(
            base + path, data=data,
            headers={"Content-Type": "application/json", **(headers or {})}) as resp:
        assert (resp.status, await resp.read()) == (200, b"")  # notifications only: no body
    too_many = [{"jsonrpc": "2.0", "id": n, "method": "data/reset"} for n in range(101)]
    assert _error(await _post(base, too_many, headers, path), -32600)["data"] == {
        "detail": "a batch holds at most 100 calls"}


CHECKS: list[Callable[..., Awaitable[None]]] = [
    check_card_shape,
    check_parse_error,
    check_invalid_requests,
    check_method_not_found,
    check_operations_true_to_handlers,
    check_bad_parts,
    check_round_trip,
    check_batches,
]


async def run_all(base: str, headers: Mapping[str, str] | None = None) -> None:
    for check in CHECKS:
        await check(base, headers)

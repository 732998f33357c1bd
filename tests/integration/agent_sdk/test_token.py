"""An agent served with a token: the card and ``/health`` stay public (the card says a bearer
token is needed), every other route refuses a request without the right one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from agent_sdk_helpers import EchoAgent

from agentenv_protocol.agent import create_app
from agentenv_protocol.testing import serve_app

TOKEN = "agent-token-3f9c"
SEND = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
    "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with serve_app(create_app(EchoAgent(), token=TOKEN)) as server:
        yield server.url


async def test_the_card_is_public_and_declares_the_bearer_scheme(url: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/.well-known/agent-card.json") as resp:
            card = await resp.json()
        assert resp.status == 200
        assert card["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
        assert card["security"] == [{"bearer": []}]
        async with http.get(url + "/health") as resp:
            assert resp.status == 200


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x",
                                    "Bearer t\u00e9l\u00e9"])
async def test_rpc_and_extensions_refuse_a_missing_or_wrong_token(
        url: str, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/a2a", json=SEND, headers=headers) as resp:
            assert resp.status == 401
            assert resp.headers["WWW-Authenticate"] == "Bearer"
            assert (await resp.json())["error"]["code"] == "unauthorized"
        async with http.post(url + "/ext/agent-config", json={"model": "m"},
                             headers=headers) as resp:
            assert resp.status == 401


async def test_the_right_token_is_served(url: str) -> None:
    async with aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {TOKEN}"}) as http, \
            http.post(url + "/a2a", json=SEND) as resp:
        body = await resp.json()
    assert resp.status == 200 and body["result"]["kind"] == "task"


async def test_without_a_token_nothing_changes() -> None:
    async with serve_app(create_app(EchoAgent())) as server, aiohttp.ClientSession() as http:
        async with http.get(server.url + "/.well-known/agent.json") as resp:
            assert "security" not in await resp.json()
        async with http.post(server.url + "/a2a", json=SEND) as resp:
            assert resp.status == 200

"""The explorer's inbox routes over the real local stores: reviews awaiting a decision are
listed and decided, a human agent's ask is read, a tool call is requested (for the run to make)
and the ask answered; a second decision or answer is refused, and every change needs the CSRF
token as every state change does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from agent_env.api import asks, reviews
from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.stores.versioned import VersionedStore
from agentenv_explorer.app import CSRF_HEADER, Explorer, create_app, csrf_token

TOKEN = "test-token-0123456789"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
WRITE = HEADERS  # a client of the API with the token; the page sends the CSRF token


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[tuple[TestClient[Any, Any], Any]]:
    documents = SqliteDocumentStore(tmp_path / "documents.sqlite3")
    explorer = Explorer(documents=documents, versioned=VersionedStore(documents),
                        objects=None, token=TOKEN)
    async with TestClient(TestServer(create_app(explorer))) as test_client:
        yield test_client, documents
    documents.close()


async def test_reviews_are_listed_and_decided_once(client: Any) -> None:
    http, documents = client
    reviews(documents).open("run-1", "gate", "Ship it?", "I fixed the order.")
    inbox = await (await http.get("/api/v1/inbox", headers=HEADERS)).json()
    assert [(r["instance_id"], r["step_id"], r["label"]) for r in inbox["reviews"]] == [
        ("run-1", "gate", "Ship it?")]
    body = {"instance_id": "run-1", "step_id": "gate", "approve": False, "comment": "not yet"}
    await http.get(f"/?token={TOKEN}")  # the cookie, as the explorer's page has it
    refused = await http.post("/api/v1/reviews/decide", json=body)
    assert refused.status == 403  # the cookie alone: the page's CSRF token is wanted too
    done = await http.post("/api/v1/reviews/decide", json=body,
                           headers={CSRF_HEADER: csrf_token(TOKEN)})
    assert done.status == 200, await done.text()
    assert (await done.json())["state"] == "rejected"
    again = await http.post("/api/v1/reviews/decide", json=body, headers=WRITE)
    assert again.status == 409 and "already rejected by explorer" in (await again.json())["error"]
    assert (await (await http.get("/api/v1/inbox", headers=HEADERS)).json())["reviews"] == []
    bad = await http.post("/api/v1/reviews/decide", json={**body, "approve": "yes"},
                          headers=WRITE)
    assert bad.status == 400 and "'approve' must be true or false" in (await bad.json())["error"]


async def test_an_ask_is_read_called_and_answered(client: Any) -> None:
    http, documents = client
    store = asks(documents)
    ask = store.open("run-2", "human_agent", "When did order 42 ship?", [
        {"name": "lookup", "description": "Find an order.", "input_schema": {}}])
    inbox = await (await http.get("/api/v1/inbox", headers=HEADERS)).json()
    assert [a["ask_id"] for a in inbox["asks"]] == [ask.ask_id]
    url = f"/api/v1/asks/{ask.ask_id}"
    call = await http.post(url + "/calls", json={"name": "lookup", "arguments": {"id": "42"}},
                           headers=WRITE)
    assert call.status == 202, await call.text()
    [requested] = store.calls(ask.ask_id, "requested")  # the run picks it up from here
    assert (requested.name, requested.arguments) == ("lookup", {"id": "42"})
    store.complete_call(requested, "shipped Monday", False)
    shown = await (await http.get(url, headers=HEADERS)).json()
    assert shown["prompt"] == "When did order 42 ship?"
    assert [(c["state"], c["result"]) for c in shown["calls"]] == [("done", "shipped Monday")]
    unknown = await http.post(url + "/calls", json={"name": "rm"}, headers=WRITE)
    assert unknown.status == 409 and "not one this ask offers" in (await unknown.json())["error"]
    empty = await http.post(url + "/answer", json={"text": " "}, headers=WRITE)
    assert empty.status == 400
    answered = await http.post(url + "/answer", json={"text": "Monday.", "by": "ada"},
                               headers=WRITE)
    assert answered.status == 200 and (await answered.json())["answered_by"] == "ada"
    assert store.get(ask.ask_id).answer == "Monday."
    twice = await http.post(url + "/answer", json={"text": "Tuesday."}, headers=WRITE)
    assert twice.status == 409
    missing = await http.get("/api/v1/asks/nope", headers=HEADERS)
    assert missing.status == 404

"""triggers/v1 on a real gateway over a real env server: a tool call or the virtual clock fires
tool, permission and nl actions; bad registrations are 400s naming the problem."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from agentenv_protocol import AgentEnvEnvironment, McpClient, environment_card, tool
from agentenv_protocol.testing import RunningServer, serve_env, serve_gateway


@environment_card(name="office")
class OfficeEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.notes: list[str] = []

    @tool(name="send_email")
    def send_email(self, to: str, body: str) -> dict[str, Any]:
        return {"sent_to": to, "words": len(body.split())}

    @tool(name="post_note")
    def post_note(self, text: str) -> str:
        self.notes.append(text)
        return "posted"


async def _post(http: aiohttp.ClientSession, gw: RunningServer, path: str,
                body: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(gw.url_for(path), json=body) as resp:
        return resp.status, await resp.json(content_type=None)


async def _state(http: aiohttp.ClientSession, gw: RunningServer) -> dict[str, Any]:
    async with http.get(gw.url_for("/triggers/state")) as resp:
        assert resp.status == 200
        return dict(await resp.json())


async def _until(check: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.05)


@pytest.fixture
async def office() -> Any:
    env = OfficeEnv()
    async with serve_env(env) as child, serve_gateway([child.url]) as gw:
        yield env, gw


async def test_a_tool_call_fires_tool_and_permission_actions(office: Any) -> None:
    env, gw = office
    trigger = {"id": "bob-replies",
               "when": {"type": "action", "tool": "send_email",
                        "where": {"args.to": {"regex": "^bob@"}}},
               "actions": [{"type": "tool", "tool": "post_note", "as": "bob",
                            "args": {"text": "Bob got ${result.words} words at ${args.to}"}},
                           {"type": "permission", "action": "disable", "role": "default",
                            "tools": ["send_email"]}]}
    async with aiohttp.ClientSession() as http:
        status, body = await _post(http, gw, "/triggers/register", {"triggers": [trigger]})
        assert status == 200 and body["added"] == ["bob-replies"]
        async with McpClient(gw.mcp_url) as agent:
            # an email to someone else provokes nothing
            await agent.call_tool("send_email", {"to": "eve@x", "body": "hi"})
            await asyncio.sleep(0.2)
            assert env.notes == []
            await agent.call_tool("send_email", {"to": "bob@x", "body": "three little words"})

            async def fired() -> bool:
                return bool((await _state(http, gw))["triggers"][0]["status"] == "fired")
            await _until(fired)
            assert env.notes == ["Bob got 3 words at bob@x"]
            refused = await agent.call_tool("send_email", {"to": "bob@x", "body": "again"})
            assert refused.is_error and "not allowed" in refused.content[0]["text"]
        state = await _state(http, gw)
        assert [e["kind"] for e in state["events"]] == [
            "added", "detected", "action_ok", "action_ok", "fired"]
        async with http.get(gw.url_for("/trajectory")) as resp:
            events = [json.loads(line) for line in (await resp.text()).splitlines()]
        note = [e for e in events if e.get("tool") == "post_note"]
        assert note and note[0]["role"] == "bob"  # recorded, under the role it acted as


async def test_the_virtual_clock_fires_an_nl_action_the_harness_claims(office: Any) -> None:
    _, gw = office
    async with aiohttp.ClientSession() as http:
        async with http.put(gw.url_for("/clock/set-time"),
                            json={"virtual_time": "2030-01-01T09:00:00Z",
                                  "virtual_seconds_per_real_second": 3600}) as resp:
            assert resp.status == 200
        status, body = await _post(http, gw, "/triggers/register", {
            "executor": {"name": "boss", "role": "boss"},
            "triggers": [{"id": "standup", "when": {"type": "time", "at": "PT30M"},
                          "actions": [{"type": "nl", "instruction": "Ask for the report."}]}]})
        assert status == 200, body
        assert (await _state(http, gw))["triggers"][0]["due"].startswith("2030-01-01T09:3")
        status, claimed = await _post(http, gw, "/triggers/next", {"wait": 5})
        assert status == 200
        [action] = claimed["actions"]
        assert action["instruction"] == "Ask for the report." and action["executor"] == "boss"
        assert (await _state(http, gw))["triggers"][0]["status"] == "queued"
        status, acked = await _post(http, gw, "/triggers/ack", {
            "firing": action["firing"], "action": action["action"], "ok": True})
        assert status == 200 and acked["status"] == "fired"
        status, again = await _post(http, gw, "/triggers/ack", {
            "firing": action["firing"], "action": action["action"], "ok": True})
        assert status == 400 and "no open nl action" in again["error"]["message"]
        # nothing more is queued: a claim waits, then answers empty
        status, claimed = await _post(http, gw, "/triggers/next", {"wait": 0.2})
        assert claimed == {"actions": []}


async def test_an_executor_and_a_trigger_provoke_nothing(office: Any) -> None:
    env, gw = office
    async with aiohttp.ClientSession() as http:
        status, _ = await _post(http, gw, "/triggers/register", {
            "executor": {"name": "bob", "role": "bob"},
            "triggers": [
                {"id": "on-note", "when": {"type": "action", "tool": "post_note"},
                 "actions": [{"type": "tool", "tool": "post_note", "args": {"text": "echo"}}]},
                {"id": "on-mail", "when": {"type": "action", "tool": "send_email"},
                 "actions": [{"type": "nl", "instruction": "Answer ${args.to}"}]}]})
        assert status == 200
        async with McpClient(gw.mcp_url, headers={"AgentEnv-Role": "bob"}) as bob:
            await bob.call_tool("send_email", {"to": "a@x", "body": "x"})
        async with McpClient(gw.mcp_url) as agent:
            await agent.call_tool("post_note", {"text": "mine"})

        async def done() -> bool:
            return {t["id"]: t["status"] for t in (await _state(http, gw))["triggers"]} == {
                "on-note": "fired", "on-mail": "armed"}
        await _until(done)
        await asyncio.sleep(0.2)
        assert env.notes == ["mine", "echo"]  # the trigger's own note fired nothing more


@pytest.mark.parametrize(("body", "says"), [
    ({"triggers": [{"id": "t", "when": {"type": "action", "tool": "nope"},
                    "actions": [{"type": "tool", "tool": "post_note"}]}]}, "unknown tool 'nope'"),
    ({"triggers": [{"id": "t", "when": {"type": "state"}, "actions": []}]}, "when.type"),
    ({"triggers": [{"id": "t", "when": {"type": "time", "at": "soon"}, "actions": [
        {"type": "tool", "tool": "post_note"}]}]}, "RFC 3339"),
    ({"triggers": [{"id": "t", "when": {"type": "time", "at": "PT1M"},
                    "actions": [{"type": "nl", "instruction": "x"}]}]}, "executor"),
    ({"watch_roles": ["bob"], "executor": {"role": "bob"}, "triggers": [
        {"id": "t", "when": {"type": "time", "at": "PT1M"},
         "actions": [{"type": "nl", "instruction": "x"}]}]}, "is watched"),
    ({"triggers": "t"}, "non-empty list"),
])
async def test_bad_registrations_are_400s_naming_the_problem(office: Any, body: Any,
                                                              says: str) -> None:
    _, gw = office
    async with aiohttp.ClientSession() as http:
        status, answer = await _post(http, gw, "/triggers/register", body)
        assert status == 400 and says in answer["error"]["message"], answer
        assert (await _state(http, gw))["triggers"] == []


async def test_the_card_declares_triggers(office: Any) -> None:
    _, gw = office
    async with aiohttp.ClientSession() as http, \
            http.get(gw.url_for("/.well-known/agent-env.json")) as resp:
        card = await resp.json()
    uris = [e["uri"] for e in card["capabilities"]["extensions"]]
    assert "urn:agentenv:triggers/v1" in uris

"""triggers/v1 on an SDK agent over raw HTTP: register, decide turn by turn, state; bad
registrations refused with the trigger named; an agent that does not enable it serves none."""

from __future__ import annotations

from typing import Any

import aiohttp
from agent_sdk_helpers import Served

from agentenv_protocol.agent import (
    TRIGGERS_V1,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
    create_app,
)
from agentenv_protocol.testing import serve_app


@a2a_agent(identity=AgentIdentity(name="user", description="A scripted user."),
           extensions=(TRIGGERS_V1,))
class UserAgent(AgentEnvAgent):
    async def run(self, request: TaskRequest[Any]) -> TaskResult:
        return TaskResult(text="(the model would answer)")


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as resp:
        return resp.status, await resp.json()


TRIGGERS = [
    {"id": "push-back", "when": {"type": "step", "turn": 2},
     "actions": [{"type": "say", "text": "Are you sure?"}]},
    {"id": "thanks", "when": {"type": "all", "of": [
        {"type": "conversational", "where": {"message": {"regex": r"\b42\b"}}},
        {"type": "step", "turn": 3, "cmp": "gte"}]},
     "actions": [{"type": "say", "text": "Thanks."}, {"type": "end"}]},
    {"id": "deadline", "when": {"type": "env_trigger", "env_id": "office",
                                "trigger_id": "five-pm"},
     "actions": [{"type": "say", "text": "It is five, wrap up."}]},
]


async def test_register_decide_and_state(http: aiohttp.ClientSession) -> None:
    async with serve_app(create_app(UserAgent())) as server:
        card = await (await http.get(server.url + "/.well-known/agent-card.json")).json()
        [ext] = card["capabilities"]["extensions"]
        assert ext["uri"] == "urn:agentenv:triggers/v1"
        assert set(ext["params"]["methods"]) == {"register", "decide", "state"}
        url = server.url + "/ext/triggers"
        status, body = await _post(http, url, {"triggers": TRIGGERS})
        assert status == 200 and body["added"] == ["push-back", "thanks", "deadline"]
        decide = server.url + "/ext/triggers/decide"
        says = [await _post(http, decide, {"turn": turn, "solver_message": message,
                                           "context_id": "c1", "env_triggers": envs})
                for turn, message, envs in [
                    (2, "It is 49.", {}),
                    (3, "It is 49.", {"office": {"five-pm": "armed"}}),
                    (4, "Sorry: it is 42.", {"office": {"five-pm": "fired"}})]]
        assert [s for s, _ in says] == [200, 200, 200]
        assert [(b["fired"], b["done"]) for _, b in says] == [
            (["push-back"], False), ([], False), (["thanks", "deadline"], True)]
        assert says[0][1]["parts"] == [{"kind": "text", "text": "Are you sure?"}]
        assert says[2][1]["parts"][0]["text"] == "Thanks.\nIt is five, wrap up."
        # once per conversation: another conversation starts afresh, a lower turn restarts
        _, again = await _post(http, decide, {"turn": 2, "context_id": "c2"})
        assert again["fired"] == ["push-back"]
        _, restarted = await _post(http, decide, {"turn": 2, "context_id": "c1"})
        assert restarted["fired"] == ["push-back"]
        async with http.get(url) as resp:
            state = await resp.json()
        assert [t["id"] for t in state["triggers"]] == ["push-back", "thanks", "deadline"]
        assert [e["kind"] for e in state["firing_log"]].count("fired") == 5


async def test_bad_registrations_and_decisions_are_refused(
        http: aiohttp.ClientSession) -> None:
    async with serve_app(create_app(UserAgent())) as server:
        url = server.url + "/ext/triggers"
        for body, says in [
            ({"triggers": []}, "non-empty list"),
            ({"triggers": [{"id": "a", "when": {"type": "clock"},
                            "actions": [{"type": "end"}]}]}, "when.type must be one of"),
            ({"triggers": [{"id": "a", "when": {"type": "step", "turn": 0},
                            "actions": [{"type": "end"}]}]}, "positive integer"),
            ({"triggers": [{"id": "a", "when": {"type": "step"},
                            "actions": [{"type": "shout"}]}]}, "'say' or 'end'"),
            ({"triggers": [{"id": "a", "when": {"type": "conversational",
                                                "where": {"message": {"regex": "("}}},
                            "actions": [{"type": "end"}]}]}, "bad regex"),
        ]:
            status, answer = await _post(http, url, body)
            assert status == 400 and says in answer["error"]["message"], answer
        status, answer = await _post(http, server.url + "/ext/triggers/decide", {"turn": 0})
        assert status == 400 and "turn" in answer["error"]["message"]


async def test_an_agent_without_it_serves_no_triggers(http: aiohttp.ClientSession,
                                                      echo: Served) -> None:
    async with http.post(echo.url + "/ext/triggers", json={"triggers": []}) as resp:
        assert resp.status in (404, 405)

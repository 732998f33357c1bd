"""What the scripted model does for the coding-agent CLIs: Codex offers each MCP server's tools
inside a Responses ``namespace`` tool and expects a call to name the namespace and the tool
apart; a turn's ``delay_seconds`` makes a slow model (for timeout and cancel tests)."""

from __future__ import annotations

import json
import time

from agentenv_agents.model_gateway import UpstreamRequest
from agentenv_agents.scripted import Script, ScriptedUpstream

NAMESPACED = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
              {"type": "namespace", "name": "mcp__echo", "description": "echo's tools",
               "tools": [{"type": "function", "name": "echo",
                          "parameters": {"type": "object"}}]}]


def script(turn: dict[str, object]) -> ScriptedUpstream:
    return ScriptedUpstream(Script.from_dict({"turns": [turn]}, name="cli"))


async def test_a_call_to_a_namespaced_tool_names_its_namespace() -> None:
    upstream = script({"match": {"tool_offered": "mcp__echo__echo"},
                       "tool_calls": [{"name": "mcp__echo__echo", "arguments": {"text": "hi"}}]})
    body = {"model": "scripted:cli", "input": "call echo", "tools": NAMESPACED}
    reply = await upstream.send(UpstreamRequest("responses", "/responses", body=body))
    assert reply.status == 200, reply.body
    (call,) = json.loads(reply.body or b"")["output"]
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "mcp__echo",
                                                               "echo")
    assert json.loads(call["arguments"]) == {"text": "hi"}


async def test_a_tool_outside_any_namespace_keeps_its_name_and_unoffered_ones_are_refused(
) -> None:
    upstream = script({"tool_calls": [{"name": "exec_command", "arguments": {}}]})
    body = {"model": "scripted:cli", "input": "run", "tools": NAMESPACED}
    reply = await upstream.send(UpstreamRequest("responses", "/responses", body=body))
    (call,) = json.loads(reply.body or b"")["output"]
    assert call["name"] == "exec_command" and "namespace" not in call
    refusing = script({"match": {"tool_offered": "mcp__mail__send"}, "text": "no"})
    refused = await refusing.send(UpstreamRequest("responses", "/responses", body=body))
    assert refused.status == 400
    assert "offered: exec_command, mcp__echo__echo" in (refused.body or b"").decode()


async def test_a_turn_waits_its_delay_before_answering() -> None:
    upstream = script({"delay_seconds": 0.3, "text": "late"})
    started = time.monotonic()
    reply = await upstream.send(UpstreamRequest("messages", "/messages", body={
        "model": "scripted:cli", "messages": [{"role": "user", "content": "hi"}]}))
    assert time.monotonic() - started >= 0.3
    assert json.loads(reply.body or b"")["content"] == [{"type": "text", "text": "late"}]

"""The shipped model-agent, served in this process: a context is a conversation (the second
prompt's model call carries the first turn, its tool call and result), a snapshot saved into
moto's S3 and loaded into another model-agent carries that conversation, and each tool call is
one changelog increment.

The model is a SCRIPTED CHAT COMPLETIONS TEST DOUBLE (below): it answers from a list and keeps
every request it got; the env is a real one-tool env server on loopback.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from test_agent_snapshot import get_grant, put_grant

from agentenv_agents.plugin import AGENTS
from agentenv_agents.snapshots import increments_under, namespace_grant
from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.agent import create_app
from agentenv_protocol.testing import RunningServer, serve_app, serve_env


@environment_card(name="memo-echo")
class Echo(AgentEnvEnvironment):
    @tool()
    def echo(self, text: str) -> str:
        """Return the text unchanged."""
        return text


class ScriptedChat:
    """A TEST DOUBLE for a Chat Completions endpoint: answers ``replies`` in order (a tool
    call or a text), keeps each request's messages in ``seen``."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    def app(self) -> web.Application:
        async def complete(request: web.Request) -> web.Response:
            body = await request.json()
            self.seen.append(body["messages"])
            message = self.replies.pop(0)
            reason = "tool_calls" if message.get("tool_calls") else "stop"
            return web.json_response({"model": body["model"], "choices": [
                {"message": {"role": "assistant", **message}, "finish_reason": reason}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2}})

        app = web.Application()
        app.router.add_post("/chat/completions", complete)
        return app


def call(call_id: str, text: str) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
        "name": "echo", "arguments": json.dumps({"text": text})}}]}


def model_agent(monkeypatch: pytest.MonkeyPatch, model_url: str) -> Any:
    """A fresh ModelAgent from the shipped folder, pointed at the test double."""
    monkeypatch.setenv("AGENTENV_MODEL_BASE_URL", model_url)
    monkeypatch.setenv("AGENTENV_MODEL_NAME", "scripted-double")
    spec = importlib.util.spec_from_file_location(
        "model_agent_under_test", Path(AGENTS) / "model-agent" / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModelAgent()


@pytest.fixture
async def env() -> AsyncIterator[RunningServer]:
    async with serve_env(Echo()) as server:
        yield server


async def prompt(http: aiohttp.ClientSession, agent: RunningServer, text: str,
                 context_id: str) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"messageId": text, "role": "user", "kind": "message",
                    "contextId": context_id, "parts": [{"kind": "text", "text": text}]},
        "configuration": {"blocking": True}}}
    async with http.post(agent.url + "/a2a", json=body) as resp:
        result = (await resp.json())["result"]
    assert result["status"]["state"] == "completed", result
    return result["status"]["message"]["parts"][0]["text"]


async def give_env(http: aiohttp.ClientSession, agent: RunningServer, env: RunningServer) -> None:
    async with http.post(agent.url + "/ext/mcp-config",
                         json={"name": "echo", "url": env.url + "/mcp"}) as resp:
        assert resp.status == 200, await resp.text()


async def test_a_context_remembers_and_a_snapshot_carries_the_conversation(
        env: RunningServer, s3_store: S3ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = ScriptedChat([call("call-1", "alpha"), {"content": "echoed alpha"},
                         {"content": "you asked for alpha"},
                         {"content": "still alpha"}])
    async with serve_app(chat.app()) as model, aiohttp.ClientSession() as http:
        first_agent = model_agent(monkeypatch, model.url)
        async with serve_app(create_app(first_agent)) as first:
            await give_env(http, first, env)
            assert await prompt(http, first, "echo alpha", "ctx") == "echoed alpha"
            assert await prompt(http, first, "what did I ask?", "ctx") == "you asked for alpha"
            # the second turn's request: system, then the whole first turn, then the prompt
            remembered = chat.seen[2]
            assert [m["role"] for m in remembered] == [
                "system", "user", "assistant", "tool", "assistant", "user"]
            assert remembered[1]["content"] == "echo alpha"
            assert remembered[2]["tool_calls"][0]["id"] == "call-1"
            assert remembered[3] == {"role": "tool", "tool_call_id": "call-1",
                                     "content": "alpha"}
            assert remembered[4]["content"] == "echoed alpha"
            async with http.post(first.url + "/ext/snapshot", json={
                    "context_id": "ctx", "objects": {
                        "trajectory": put_grant(s3_store, "snap/t.json")}}) as resp:
                saved = await resp.json()
            assert resp.status == 200, saved
        heir = model_agent(monkeypatch, model.url)
        async with serve_app(create_app(heir)) as second:
            async with http.put(second.url + "/ext/snapshot", json={
                    "objects": {"trajectory": get_grant(s3_store, "snap/t.json",
                                                        saved["objects"]["trajectory"])},
                    "target_context_id": "resumed"}) as resp:
                assert resp.status == 200, await resp.text()
            assert await prompt(http, second, "and now?", "resumed") == "still alpha"
        assert [m["role"] for m in chat.seen[3]] == [
            "system", "user", "assistant", "tool", "assistant", "user", "assistant", "user"]
        assert chat.seen[3][5]["content"] == "what did I ask?"


async def test_each_tool_call_is_one_changelog_increment(
        env: RunningServer, s3_store: S3ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = ScriptedChat([call("c1", "one"), call("c2", "two"), {"content": "done"}])
    async with serve_app(chat.app()) as model, aiohttp.ClientSession() as http, \
            serve_app(create_app(model_agent(monkeypatch, model.url))) as agent:
        await give_env(http, agent, env)
        async with http.post(agent.url + "/ext/snapshot/changelog", json={
                "write_namespace": namespace_grant(s3_store, "log/")}) as resp:
            assert (resp.status, await resp.json()) == (200, {"roots": []})  # no workspace
        assert await prompt(http, agent, "echo twice", "ctx") == "done"
    # two tool calls, then the answer at the turn's end
    assert [k for _, k in increments_under(s3_store, "log/", None)] == [
        "log/000001.tar", "log/000002.tar", "log/000003.tar"]

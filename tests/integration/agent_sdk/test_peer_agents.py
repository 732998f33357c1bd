"""peer-agents/v1 on SDK agents over raw HTTP: peers set on one agent give it a
peer_send_message tool (its own MCP server, registered in mcp-config) that messages another
real agent over A2A and returns its answer; bad peers are refused; a peer that is down is a
tool error, not a crash."""

from __future__ import annotations

from typing import Any

import aiohttp

from agentenv_protocol.agent import (
    MCP_CONFIG_V1,
    PEER_AGENTS_V1,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
    create_app,
)
from agentenv_protocol.client import McpClient
from agentenv_protocol.parts import TextPart
from agentenv_protocol.testing import serve_app


@a2a_agent(identity=AgentIdentity(name="asker", description="Has peers."),
           extensions=(MCP_CONFIG_V1, PEER_AGENTS_V1))
class Asker(AgentEnvAgent):
    async def run(self, request: TaskRequest[Any]) -> TaskResult:
        return TaskResult(text="-")


@a2a_agent(identity=AgentIdentity(name="helper", description="Answers."))
class Helper(AgentEnvAgent):
    def __init__(self) -> None:
        self.heard: list[tuple[str, str]] = []

    async def run(self, request: TaskRequest[Any]) -> TaskResult:
        text = " ".join(p.text for p in request.parts if isinstance(p, TextPart))
        self.heard.append((request.context_id, text))
        return TaskResult(text=f"helper heard: {text}")


async def test_a_peer_is_messaged_through_the_tool() -> None:
    helper = Helper()
    async with serve_app(create_app(Asker(), token="s3cret")) as asker, \
            serve_app(create_app(helper, token="h3lper")) as other, \
            aiohttp.ClientSession(headers={"Authorization": "Bearer s3cret"}) as http:
        card = await (await http.get(asker.url + "/.well-known/agent-card.json")).json()
        assert "urn:agentenv:peer-agents/v1" in [e["uri"] for e in
                                                 card["capabilities"]["extensions"]]
        peers = {"peers": [{"name": "helper", "url": other.url, "description": "answers",
                            "headers": {"Authorization": "Bearer h3lper"}}]}
        async with http.post(asker.url + "/ext/peer-agents", json=peers) as resp:
            assert resp.status == 200 and (await resp.json())["peers"] == ["helper"]
        listed = await (await http.get(asker.url + "/ext/peer-agents")).json()
        assert listed == {"peers": [{"name": "helper", "url": other.url,
                                     "description": "answers"}]}  # no headers shown
        servers = (await (await http.get(asker.url + "/ext/mcp-config")).json())["mcp_servers"]
        assert servers["peers"]["url"].endswith("/ext/peer-agents/mcp")
        async with McpClient(asker.url + "/ext/peer-agents/mcp",
                             headers={"Authorization": "Bearer s3cret"}) as client:
            [tool] = await client.list_tools()
            assert tool.name == "peer_send_message"
            assert tool.input_schema["properties"]["peer"]["enum"] == ["helper"]
            first = await client.call_tool("peer_send_message",
                                           {"peer": "helper", "message": "hello"})
            second = await client.call_tool("peer_send_message",
                                            {"peer": "helper", "message": "again"})
            unknown = await client.call_tool("peer_send_message",
                                             {"peer": "nobody", "message": "x"})
        assert (first.text, first.is_error) == ("helper heard: hello", False)
        assert second.text == "helper heard: again"
        assert len({context for context, _ in helper.heard}) == 1  # one thread per peer
        assert unknown.is_error and "no peer named 'nobody'" in unknown.text
        async with http.post(asker.url + "/ext/peer-agents", json={"peers": []}) as resp:
            assert resp.status == 200
        servers = (await (await http.get(asker.url + "/ext/mcp-config")).json())["mcp_servers"]
        assert "peers" not in servers  # cleared with the peers


async def test_bad_peers_are_refused_and_a_peer_down_is_a_tool_error() -> None:
    async with serve_app(create_app(Asker())) as asker, aiohttp.ClientSession() as http:
        for body, says in [({"peers": "x"}, "must be a list"),
                           ({"peers": [{"name": "a", "url": "ftp://x"}]}, "http(s) url"),
                           ({"peers": [{"name": "a", "url": "http://x"},
                                       {"name": "a", "url": "http://y"}]}, "given twice")]:
            async with http.post(asker.url + "/ext/peer-agents", json=body) as resp:
                assert resp.status == 400 and says in (await resp.json())["error"]["message"]
        async with http.post(asker.url + "/ext/peer-agents", json={"peers": [
                {"name": "gone", "url": "http://127.0.0.1:9"}]}) as resp:
            assert resp.status == 200
        async with McpClient(asker.url + "/ext/peer-agents/mcp") as client:
            down = await client.call_tool("peer_send_message", {"peer": "gone", "message": "x"})
        assert down.is_error and "peer 'gone' could not be reached" in down.text

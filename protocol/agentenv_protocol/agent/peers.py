"""peer-agents/v1: an agent messages other agents through a tool of its own.

Why: multi-agent tasks (a planner and a coder, a solver that consults a colleague) need agents
that talk to each other without each author writing an A2A client. The runtime sets an agent's
peers (``POST /ext/peer-agents`` ``{"peers": [{name, url, headers?, description?}]}``; an
empty list clears them; ``GET`` lists them, headers left out). The SDK then serves one MCP tool,
``peer_send_message(peer, message)``, at ``/ext/peer-agents/mcp`` on the agent's own server, and
registers that server in mcp-config as ``peers`` (``http://127.0.0.1:<port>/ext/peer-agents/
mcp``), so an agent that uses its MCP servers finds the tool with no code of its own. A call
sends the message to the peer as an A2A ``message/send`` (in one A2A context per peer, so the
peer sees one thread) and waits for the peer's answer (``tasks/get``), which is the tool's
result; the call is in the caller's trajectory, the message in the peer's.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit

import attrs

from ..access import Caller
from ..errors import AgentEnvError

PEERS_PATH = "/ext/peer-agents"
PEER_MCP_PATH = "/ext/peer-agents/mcp"
#: The mcp-config name the peers' tool server is registered under.
PEERS_SERVER = "peers"
TOOL = "peer_send_message"
#: How long a peer may take to answer one message.
ANSWER_TIMEOUT = 600.0
_ENDED = frozenset({"completed", "failed", "canceled", "rejected", "input-required",
                    "auth-required"})


def _bad(message: str) -> AgentEnvError:
    return AgentEnvError("invalid_params", message, status=400)


@attrs.frozen
class Peer:
    name: str
    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict)
    description: str | None = None


def _text(parts: Any) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts or []
                     if isinstance(p, dict) and p.get("kind") == "text")


class PeerState:
    """The peers the runtime set, and the tool host that messages them."""

    def __init__(self) -> None:
        self.peers: dict[str, Peer] = {}
        self._contexts: dict[str, str] = {}

    def set(self, body: Any) -> dict[str, Any]:
        peers = body.get("peers") if isinstance(body, dict) else None
        if not isinstance(peers, list):
            raise _bad("peers must be a list of {name, url, headers?, description?}")
        found: dict[str, Peer] = {}
        for index, raw in enumerate(peers):
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) \
                    or not raw["name"] or not isinstance(raw.get("url"), str) \
                    or not raw["url"].startswith(("http://", "https://")):
                raise _bad(f"peers[{index}] needs a name and an http(s) url")
            headers = raw.get("headers") or {}
            if not isinstance(headers, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
                raise _bad(f"peers[{index}].headers must map names to strings")
            if raw["name"] in found:
                raise _bad(f"peer {raw['name']!r} is given twice")
            description = raw.get("description")
            found[raw["name"]] = Peer(raw["name"], raw["url"].rstrip("/"), dict(headers),
                                      description if isinstance(description, str) else None)
        self.peers = found
        return {"status": "updated", "peers": list(found)}

    def listing(self) -> dict[str, Any]:
        return {"peers": [{"name": p.name, "url": p.url, "description": p.description}
                          for p in self.peers.values()]}

    # -- the tool host (see mcp_http.ToolHost) --------------------------------------------------
    def mcp_tools(self, caller: Caller) -> Sequence[dict[str, Any]]:
        names = sorted(self.peers)
        described = "; ".join(f"{p.name}: {p.description}" for p in self.peers.values()
                              if p.description)
        return [{"name": TOOL, "description": "Send a message to another agent (a peer) and "
                 "get its answer." + (f" Peers: {described}." if described else ""),
                 "inputSchema": {"type": "object", "required": ["peer", "message"],
                                 "properties": {
                                     "peer": {"type": "string", "enum": names,
                                              "description": "The peer's name."},
                                     "message": {"type": "string",
                                                 "description": "What to tell or ask it."}}}}]

    async def mcp_call(self, name: str, arguments: dict[str, Any], caller: Caller,
                       call_id: str) -> dict[str, Any]:
        def result(text: str, error: bool = False) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": text}], "isError": error}

        if name != TOOL:
            return result(f"Unknown tool: {name}", True)
        peer = self.peers.get(str(arguments.get("peer")))
        if peer is None:
            return result(f"no peer named {arguments.get('peer')!r} (peers: "
                          f"{', '.join(sorted(self.peers)) or 'none'})", True)
        try:
            return result(await self.send(peer, str(arguments.get("message") or "")))
        except Exception as exc:  # whatever kept the answer away is the tool's error
            return result(f"peer {peer.name!r} could not be reached: "
                          f"{exc or type(exc).__name__}", True)

    async def send(self, peer: Peer, message: str) -> str:
        """``message`` to ``peer`` over A2A; its answer's text."""
        import aiohttp

        deadline = time.monotonic() + ANSWER_TIMEOUT
        context = self._contexts.setdefault(peer.name, uuid.uuid4().hex)
        async with aiohttp.ClientSession(headers=dict(peer.headers),
                                         timeout=aiohttp.ClientTimeout(total=60)) as http:
            async with http.get(f"{peer.url}/.well-known/agent-card.json") as resp:
                card = await resp.json(content_type=None) if resp.status == 200 else {}
            # the card's path, on the address the runtime gave: a card may name its own host
            # as it sees itself (localhost, 0.0.0.0), which is not where a peer reaches it
            path = urlsplit(str((card or {}).get("url") or "")).path.lstrip("/")
            rpc = urljoin(peer.url + "/", path)

            async def call(method: str, params: dict[str, Any]) -> Any:
                body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method,
                        "params": params}
                async with http.post(rpc, json=body) as resp:
                    answer = await resp.json(content_type=None)
                if not isinstance(answer, dict) or "error" in answer:
                    raise ValueError(f"{method} answered {(answer or {}).get('error')}")
                return answer.get("result") or {}

            task = await call("message/send", {"message": {
                "messageId": uuid.uuid4().hex, "role": "user", "contextId": context,
                "parts": [{"kind": "text", "text": message}]},
                "configuration": {"blocking": False}})
            if task.get("kind") == "message":
                return _text(task.get("parts"))
            while (task.get("status") or {}).get("state") not in _ENDED:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no answer within {ANSWER_TIMEOUT:g}s")
                await asyncio.sleep(0.2)
                task = await call("tasks/get", {"id": task.get("id")})
        status = task.get("status") or {}
        text = _text((status.get("message") or {}).get("parts"))
        if not text:
            text = "\n".join(_text(a.get("parts")) for a in task.get("artifacts") or [])
        if status.get("state") != "completed":
            raise ValueError(f"its task ended {status.get('state')}: {text[:200]}")
        return text

    @staticmethod
    def card_entry(uri: str) -> dict[str, Any]:
        return {"uri": uri,
                "description": "Peers this agent can message with its peer_send_message tool.",
                "params": {"endpoint": PEERS_PATH, "methods": {
                    "set": {"method": "POST", "endpoint": PEERS_PATH,
                            "request": {"peers": "array"}},
                    "list": {"method": "GET", "endpoint": PEERS_PATH,
                             "response": {"peers": "array"}}}}}

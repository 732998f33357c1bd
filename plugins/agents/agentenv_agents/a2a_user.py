"""The user of a conversation reached over A2A at a URL: ``prompt_agent``'s ``user_a2a_url``,
else ``[conversations] default_human_a2a_url`` (a human-in-the-loop hub, or any agent served
somewhere else).

Each of the user's turns is one A2A task: the agent's last reply goes to the user as a
``message/send`` (in the conversation's own A2A context, so the user sees one thread), and the
task is polled with ``tasks/get`` until it ends; its answer (the status message's text, else the
artifacts' text) is the user's next line. Nothing is deployed and nothing is torn down: the
user runs on its own. The card (``agent-card.json``, else ``agent.json``) says where its
JSON-RPC is; a URL with no card is taken as the JSON-RPC endpoint itself.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any
from urllib.parse import urljoin

import attrs

from agent_env.api import InfraError, StepError, cause

#: The states after which a user's task says no more (``input-required``: it answered and
#: waits for the agent's next line, which is how a human hub parks a thread).
ENDED = frozenset({"completed", "failed", "canceled", "rejected", "input-required",
                   "auth-required"})
POLL_SECONDS = 0.5


@attrs.define
class A2aUser:
    """A user at ``url``, asked one turn at a time (see the module)."""

    url: str
    context_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    _rpc_url: str | None = None

    async def says(self, text: str, timeout: float) -> str:
        """The user's answer to ``text`` (the agent's last reply)."""
        import aiohttp

        deadline = time.monotonic() + timeout
        try:
            async with aiohttp.ClientSession() as http:
                rpc = await self._endpoint(http)
                message = {"messageId": uuid.uuid4().hex, "role": "user",
                           "parts": [{"kind": "text", "text": text}],
                           "contextId": self.context_id}
                task = await _call(http, rpc, "message/send", {
                    "message": message, "configuration": {"blocking": False}})
                if task.get("kind") == "message":  # answered at once, with no task
                    return _text(task.get("parts"))
                task_id = str(task.get("id") or "")
                while (task.get("status") or {}).get("state") not in ENDED:
                    if time.monotonic() > deadline:
                        raise StepError(f"the user at {self.url} did not answer within "
                                        f"{timeout:g}s")
                    await asyncio.sleep(POLL_SECONDS)
                    task = await _call(http, rpc, "tasks/get", {"id": task_id})
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise InfraError(f"the user at {self.url} could not be reached: "
                             f"{cause(exc)}") from None
        status = task.get("status") or {}
        if status.get("state") in ("failed", "canceled", "rejected"):
            raise StepError(f"the user at {self.url} ended its turn {status.get('state')}: "
                            f"{_text((status.get('message') or {}).get('parts')) or 'no message'}")
        answer = _text((status.get("message") or {}).get("parts"))
        if not answer:
            answer = "\n".join(_text(a.get("parts")) for a in task.get("artifacts") or [])
        return answer

    async def _endpoint(self, http: Any) -> str:
        """Where the user's JSON-RPC is: its card's ``url``, else the URL itself."""
        if self._rpc_url is None:
            import aiohttp

            self._rpc_url = self.url
            base = self.url.rstrip("/")
            for name in ("agent-card.json", "agent.json"):
                try:
                    async with http.get(f"{base}/.well-known/{name}",
                                        timeout=aiohttp.ClientTimeout(total=10)) as resp:
                        card = await resp.json(content_type=None) if resp.status == 200 else None
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    card = None
                if isinstance(card, dict) and isinstance(card.get("url"), str):
                    self._rpc_url = urljoin(base + "/", card["url"])
                    break
        return self._rpc_url


async def _call(http: Any, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    import aiohttp

    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    async with http.post(url, json=body, timeout=aiohttp.ClientTimeout(total=30)) as resp:
        if resp.status >= 400:
            raise StepError(f"the user at {url} answered {method} with HTTP {resp.status}")
        reply = await resp.json(content_type=None)
    if not isinstance(reply, dict) or reply.get("error"):
        error = reply.get("error") if isinstance(reply, dict) else reply
        raise StepError(f"the user at {url}: {method} failed: {error}")
    return dict(reply.get("result") or {})


def _text(parts: Any) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts or []
                     if isinstance(p, dict) and p.get("kind") == "text")

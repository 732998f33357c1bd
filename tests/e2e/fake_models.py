"""TEST DOUBLES of model endpoints for the e2e tests (no model runs on these machines).

``ToolCallingFake`` speaks OpenAI Chat Completions over real HTTP: given an echo tool, it asks
for it with the quoted text of the prompt, then answers with what the tool returned; given no
such tool, it answers ``PLAIN: <prompt>``. It wants ``KEY`` and reports ``USAGE`` per call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

PLAIN = "fake model answer"
KEY = "sk-e2e-upstream-key-0b7e"
MODEL = "fake-tool-model"
USAGE = {"prompt_tokens": 123, "completion_tokens": 17, "total_tokens": 140}


class ToolCallingFake:
    """TEST DOUBLE of an OpenAI-compatible model server (see the module docstring)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        #: the headers of each request, in order (what the gateway added is checked on them)
        self.headers: list[dict[str, str]] = []

    async def complete(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return web.json_response({"error": {"message": "bad key", "type": "auth"}},
                                     status=401)
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        last = body["messages"][-1]
        if last["role"] == "tool":
            message = {"role": "assistant", "content": f"The echo tool returned: {last['content']}"}
            finish = "stop"
        else:
            quoted = re.search(r"'([^']+)'", last["content"])
            tool = next((t["function"]["name"] for t in body.get("tools") or []
                         if "echo" in t["function"]["name"]), None)
            if tool is None:  # no echo tool to call: a plain answer
                message = {"role": "assistant", "content": f"{PLAIN}: {last['content']}"}
                return self._answer(body, message, "stop")
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(self.requests)}", "type": "function",
                "function": {"name": tool,
                             "arguments": json.dumps({"text": quoted.group(1) if quoted else ""})},
            }]}
            finish = "tool_calls"
        return self._answer(body, message, finish)

    def _answer(self, body: dict[str, Any], message: dict[str, Any],
                finish: str) -> web.Response:
        return web.json_response({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body["model"], "usage": USAGE,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

"""A TEST DOUBLE: a tiny OpenAI/Anthropic-compatible model server standing in for a provider
(or a LiteLLM proxy) behind the model gateway. Not a model: it answers fixed text with fixed,
known usage numbers, so tests can check that the gateway forwards, streams, passes failures
through and records the upstream's own counts.

It accepts only ``KEY`` and ``OTHER_KEY`` (``Authorization: Bearer`` on OpenAI routes,
``x-api-key`` on ``/v1/messages``), remembers every request it got (``seen``), and fails the
next calls on demand (``fail_next``) or breaks its streams off after two events (``break_streams``).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from aiohttp import web

KEY = "sk-upstream-SECRET-never-for-agents"
#: a second account's key (a run's judges may ask with their own)
OTHER_KEY = "sk-judge-SECRET-key"
TEXT = "Hello from the fake upstream."
#: The usage it reports, per API (deliberately unlike any word count).
CHAT_USAGE = {"prompt_tokens": 111, "completion_tokens": 7, "total_tokens": 118}
RESPONSES_USAGE = {"input_tokens": 222, "input_tokens_details": {"cached_tokens": 0},
                   "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": 231}
MESSAGES_USAGE = {"input_tokens": 300, "cache_creation_input_tokens": 20,
                  "cache_read_input_tokens": 13, "output_tokens": 11}


@attrs.define
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


@attrs.define
class Failure:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = attrs.field(factory=dict)


def _sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return ((f"event: {event}\n" if event else "") + f"data: {payload}\n\n").encode()


class FakeUpstream:
    """The fake's state and routes; ``app()`` for ``serve_app``."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.failures: list[Failure] = []
        self.break_streams = False

    def fail_next(self, status: int, message: str, *, kind: str = "rate_limit_error",
                  headers: dict[str, str] | None = None) -> None:
        self.failures.append(Failure(status, {"error": {"message": message, "type": kind}},
                                     dict(headers or {})))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_get("/v1/models", self.models)
        return app

    async def _admit(self, request: web.Request, anthropic: bool) -> web.Response | Any:
        body = await request.json() if request.can_read_body else None
        self.seen.append(Seen(request.path, dict(request.headers), body))
        given = (request.headers.get("x-api-key") if anthropic
                 else request.headers.get("Authorization", "").removeprefix("Bearer "))
        if given not in (KEY, OTHER_KEY):
            return web.json_response(
                {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                           "code": "invalid_api_key"}}, status=401)
        if self.failures:
            failure = self.failures.pop(0)
            return web.json_response(failure.body, status=failure.status,
                                     headers=failure.headers)
        return body

    async def models(self, request: web.Request) -> web.Response:
        admitted = await self._admit(request, "x-api-key" in request.headers)
        if isinstance(admitted, web.Response):
            return admitted
        return web.json_response({"object": "list", "data": [
            {"id": "fake-model", "object": "model", "created": 0, "owned_by": "test"}]})

    async def _stream(self, request: web.Request, events: list[bytes]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "x-request-id": "req_fake_1"})
        await response.prepare(request)
        for n, event in enumerate(events):
            if self.break_streams and n == 2:  # die mid-stream, as a crashed upstream would
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(event)
        await response.write_eof()
        return response

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._admit(request, False)
        if isinstance(body, web.Response):
            return body
        model = body["model"]
        if not body.get("stream"):
            return web.json_response({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": TEXT}}],
                "usage": CHAT_USAGE}, headers={"x-request-id": "req_fake_1"})
        include = (body.get("stream_options") or {}).get("include_usage")
        head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
                "model": model}
        extra = {"usage": None} if include else {}
        events = [_sse({**head, **extra, "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})]
        events += [_sse({**head, **extra, "choices": [
            {"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]})
            for word in TEXT.split()]
        events.append(_sse({**head, **extra, "choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        if include:
            events.append(_sse({**head, "choices": [], "usage": CHAT_USAGE}))
        events.append(_sse("[DONE]"))
        return await self._stream(request, events)

    def _response(self, model: str, status: str) -> dict[str, Any]:
        done = status == "completed"
        item = {"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": TEXT, "annotations": []}]}
        return {"id": "resp_fake", "object": "response", "created_at": 1, "status": status,
                "model": model, "output": [item] if done else [], "error": None,
                "incomplete_details": None, "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": [], "usage": RESPONSES_USAGE if done else None}

    async def responses(self, request: web.Request) -> web.StreamResponse:
        body = await self._admit(request, False)
        if isinstance(body, web.Response):
            return body
        model = body["model"]
        if not body.get("stream"):
            return web.json_response(self._response(model, "completed"))
        item = self._response(model, "completed")["output"][0]
        ids = {"item_id": "msg_fake", "output_index": 0, "content_index": 0}
        kinds_and_fields: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": self._response(model, "in_progress")}),
            ("response.output_item.added", {"output_index": 0,
                                            "item": {**item, "content": [],
                                                     "status": "in_progress"}}),
            ("response.content_part.added", {**ids, "part": {"type": "output_text", "text": "",
                                                             "annotations": []}}),
            ("response.output_text.delta", {**ids, "delta": TEXT}),
            ("response.output_text.done", {**ids, "text": TEXT}),
            ("response.content_part.done", {**ids, "part": item["content"][0]}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            ("response.completed", {"response": self._response(model, "completed")}),
        ]
        events = [_sse({"type": kind, "sequence_number": n, **fields}, kind)
                  for n, (kind, fields) in enumerate(kinds_and_fields)]
        return await self._stream(request, events)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._admit(request, True)
        if isinstance(body, web.Response):
            return body
        message = {"id": "msg_fake", "type": "message", "role": "assistant",
                   "model": body["model"], "content": [{"type": "text", "text": TEXT}],
                   "stop_reason": "end_turn", "stop_sequence": None, "usage": MESSAGES_USAGE}
        if not body.get("stream"):
            return web.json_response(message)
        start = {**message, "content": [], "stop_reason": None,
                 "usage": {**MESSAGES_USAGE, "output_tokens": 1}}
        events = [
            _sse({"type": "message_start", "message": start}, "message_start"),
            _sse({"type": "content_block_start", "index": 0,
                  "content_block": {"type": "text", "text": ""}}, "content_block_start"),
            _sse({"type": "ping"}, "ping"),
            _sse({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "text_delta", "text": TEXT}}, "content_block_delta"),
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                     "stop_sequence": None},
                  "usage": {"output_tokens": MESSAGES_USAGE["output_tokens"]}},
                 "message_delta"),
            _sse({"type": "message_stop"}, "message_stop"),
        ]
        return await self._stream(request, events)


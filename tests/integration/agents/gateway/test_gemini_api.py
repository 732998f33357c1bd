"""The Gemini API through a real model gateway, driven by Google's official ``google-genai`` SDK:
the scripted model's agent loop (text, function calls, function responses) whole and streamed,
token counting, the 401 and 404 in Google's error shape, and the gateway forwarding to an HTTP
upstream (a TEST DOUBLE of Google's endpoint, in this file) with the upstream key, after
aliases, recording the upstream's own usage."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from gateway_helpers import TOKEN
from google import genai
from google.genai import errors, types

from agentenv_agents.model_gateway import HttpUpstream, ModelGateway
from agentenv_protocol.testing import RunningServer, serve_app

MODEL = "scripted:fix-bug"
FILE = "import sys\n\ndef main():\n    return 1 / 0\n"
TOOLS = [types.Tool(function_declarations=[
    types.FunctionDeclaration(name=name, parameters_json_schema={"type": "object"})
    for name in ("read_file", "write_file")])]
UPSTREAM_KEY = "AIza-upstream-SECRET-never-for-agents"
UPSTREAM_USAGE = {"promptTokenCount": 321, "candidatesTokenCount": 12, "thoughtsTokenCount": 5,
                  "totalTokenCount": 338}


def client(gateway: ModelGateway, key: str = TOKEN) -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(
        base_url=gateway.url, retry_options=types.HttpRetryOptions(attempts=1)))


async def turn(gemini: genai.Client, contents: list[types.Content], stream: bool
               ) -> tuple[str, list[types.FunctionCall], str | None, str | None]:
    """One call; returns (text, function calls, finish reason, model version)."""
    config = types.GenerateContentConfig(tools=TOOLS, automatic_function_calling=types.
                                         AutomaticFunctionCallingConfig(disable=True))
    if not stream:
        done = await gemini.aio.models.generate_content(model=MODEL, contents=contents,
                                                        config=config)
        parts = done.candidates[0].content.parts or []  # type: ignore[index,union-attr]
        return ("".join(p.text for p in parts if p.text),
                [p.function_call for p in parts if p.function_call],
                str(done.candidates[0].finish_reason), done.model_version)  # type: ignore[index]
    text, calls, finish, version = "", [], None, None
    async for chunk in await gemini.aio.models.generate_content_stream(
            model=MODEL, contents=contents, config=config):
        for part in (chunk.candidates[0].content.parts or []):  # type: ignore[index,union-attr]
            text += part.text or ""
            if part.function_call:
                calls.append(part.function_call)
        finish = str(chunk.candidates[0].finish_reason or finish or "")  # type: ignore[index]
        version = chunk.model_version or version
    return text, calls, finish, version


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_gemini_agent_loop_with_function_calls(scripted_gateway: ModelGateway,
                                                     stream: bool) -> None:
    gemini = client(scripted_gateway)
    history = [types.Content(role="user", parts=[types.Part(text="Fix app.py")])]
    seen: list[tuple[str, list[str]]] = []
    for _ in range(4):
        text, calls, finish, version = await turn(gemini, history, stream)
        assert version == MODEL and finish == "FinishReason.STOP"
        seen.append((text, [c.name or "" for c in calls]))
        parts = ([types.Part(text=text)] if text else []) + [
            types.Part(function_call=c) for c in calls]
        history.append(types.Content(role="model", parts=parts))
        if not calls:
            history.append(types.Content(role="user", parts=[types.Part(text="go on")]))
            continue
        history.append(types.Content(role="user", parts=[types.Part(
            function_response=types.FunctionResponse(
                name=c.name, response={"output": FILE if c.name == "read_file" else "ok"}))
            for c in calls]))
    assert seen == [("Let me look at the file.", []), ("", ["read_file"]),
                    ("Found main, fixing it.", ["write_file"]), ("Done: main is fixed.", [])]
    records = scripted_gateway.recorder.calls
    assert [(c.api, c.model, c.status, c.stream, c.finish_reason) for c in records] == [
        ("generate_content", MODEL, 200, stream, "STOP")] * 4
    assert all(c.input_tokens and c.output_tokens for c in records)
    # a streamed answer is recorded as the response its events amount to
    parts = records[2].response["candidates"][0]["content"]["parts"]
    assert parts == [{"text": "Found main, fixing it."},
                     {"functionCall": {"name": "write_file",
                                       "args": {"path": "app.py", "text": "def main(): pass"}}}]


async def test_a_failed_match_sees_the_function_response(scripted_gateway: ModelGateway) -> None:
    """The third turn checks the latest tool result: a Gemini functionResponse counts as one."""
    gemini = client(scripted_gateway)
    history = [types.Content(role="user", parts=[types.Part(text="go")]),
               types.Content(role="model", parts=[types.Part(text="ok")]),
               types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
                   name="read_file", args={}))]),
               types.Content(role="user", parts=[types.Part(function_response=types.
                             FunctionResponse(name="read_file", response={"output": "empty"}))])]
    with pytest.raises(errors.ClientError) as refused:
        await turn(gemini, history, stream=False)
    assert refused.value.code == 400 and refused.value.status == "INVALID_ARGUMENT"
    assert "turn 3: expected the latest tool result to contain 'def main' (it is 'empty')" \
        in str(refused.value.message)


async def test_count_tokens_and_the_scripted_rule(scripted_gateway: ModelGateway) -> None:
    counted = await client(scripted_gateway).aio.models.count_tokens(
        model=MODEL, contents="three small words")
    assert counted.total_tokens == 4  # every string's words: the three and the role, "user"
    assert scripted_gateway.recorder.calls == []  # counting is passed on, not recorded


async def test_wrong_key_unknown_method_and_the_key_parameter(
        scripted_gateway: ModelGateway) -> None:
    with pytest.raises(errors.ClientError) as wrong:
        await client(scripted_gateway, "wrong").aio.models.generate_content(
            model=MODEL, contents="hi")
    assert (wrong.value.code, wrong.value.status) == (401, "UNAUTHENTICATED")
    base = f"{scripted_gateway.url}/v1beta/models/{MODEL}"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}:embedContent", json=body,
                             headers={"x-goog-api-key": TOKEN}) as unknown:
            assert unknown.status == 404
            error = (await unknown.json())["error"]
            assert error["status"] == "NOT_FOUND" and "embedContent" in error["message"]
        # Google's ?key= form; streamGenerateContent without alt=sse answers one JSON array
        async with http.post(f"{base}:streamGenerateContent", params={"key": TOKEN},
                             json=body) as whole:
            assert whole.status == 200
            chunks = await whole.json()
    assert isinstance(chunks, list) and chunks[0]["candidates"][0]["content"]["parts"] == [
        {"text": "Let me look at the file."}]
    assert [(c.status, c.stream, c.output_tokens) for c in scripted_gateway.recorder.calls] == [
        (401, False, None), (200, False, 6)]


# -- the HTTP upstream -------------------------------------------------------------------------

class FakeGemini:
    """A TEST DOUBLE of Google's Gemini API endpoint: fixed text, fixed usage, and every
    request it got (path, key header, body)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, Any]] = []

    def app(self) -> aiohttp.web.Application:
        app = aiohttp.web.Application()
        app.router.add_post("/v1beta/models/{target}", self.answer)
        return app

    async def answer(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        self.seen.append((request.path_qs, request.headers.get("x-goog-api-key"),
                          await request.json()))
        if request.headers.get("x-goog-api-key") != UPSTREAM_KEY:
            return aiohttp.web.json_response({"error": {"code": 403, "message": "bad key",
                                                        "status": "PERMISSION_DENIED"}}, 403)
        body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi there."}]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": UPSTREAM_USAGE, "modelVersion": "gemini-test-001"}
        if request.query.get("alt") != "sse":
            return aiohttp.web.json_response(body)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        first = {**body, "candidates": [{"content": {"role": "model",
                                                     "parts": [{"text": "Hi "}]}}]}
        del first["usageMetadata"]
        body["candidates"][0]["content"]["parts"] = [{"text": "there."}]
        for event in (first, body):
            await response.write(f"data: {json.dumps(event)}\r\n\r\n".encode())
        await response.write_eof()
        return response


@pytest.fixture
async def gemini_upstream() -> AsyncIterator[tuple[FakeGemini, RunningServer]]:
    fake = FakeGemini()
    async with serve_app(fake.app()) as server:
        yield fake, server


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_calls_go_upstream_with_its_key_after_aliases(
        gemini_upstream: tuple[FakeGemini, RunningServer], stream: bool) -> None:
    fake, server = gemini_upstream
    gateway = ModelGateway(HttpUpstream(server.url, UPSTREAM_KEY), token=TOKEN,
                           host="127.0.0.1", aliases={"agent": "gemini-test"})
    await gateway.start()
    try:
        gemini = client(gateway)
        if stream:
            text = "".join([c.text or "" async for c in
                            await gemini.aio.models.generate_content_stream(
                                model="agent", contents="hello")])
        else:
            text = (await gemini.aio.models.generate_content(model="agent",
                                                             contents="hello")).text or ""
    finally:
        await gateway.stop()
    assert text == "Hi there."
    path, key, body = fake.seen[0]
    assert path == "/v1beta/models/gemini-test:" + (
        "streamGenerateContent?alt=sse" if stream else "generateContent")
    assert key == UPSTREAM_KEY and TOKEN not in json.dumps(body)
    (call,) = gateway.recorder.calls
    assert (call.requested_model, call.model, call.input_tokens, call.output_tokens,
            call.finish_reason) == ("agent", "gemini-test-001", 321, 17, "STOP")

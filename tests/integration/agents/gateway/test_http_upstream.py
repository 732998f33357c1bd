"""The model gateway in front of a real HTTP upstream (the local test double in
fake_openai_upstream.py), driven by the official SDKs: forwarding with the real key, the key
never reaching the agent's side, streams passed through, the upstream's own token counts
recorded, failures passed through with their status, an unreachable upstream as 502."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from fake_openai_upstream import (
    CHAT_USAGE,
    KEY,
    MESSAGES_USAGE,
    OTHER_KEY,
    RESPONSES_USAGE,
    TEXT,
    FakeUpstream,
)
from gateway_helpers import TOKEN, anthropic_client, openai_client

from agentenv_agents.model_gateway import HttpUpstream, ModelGateway
from agentenv_protocol.testing import RunningServer, free_port

Fake = tuple[FakeUpstream, RunningServer]
USER = [{"role": "user", "content": "hello"}]


def no_key_in(*texts: Any) -> bool:
    return all(KEY not in str(text) for text in texts)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_chat_completions_forwarded_with_the_real_key(
        http_gateway: ModelGateway, fake: Fake, stream: bool) -> None:
    upstream, _ = fake
    client = openai_client(http_gateway)
    raw = await client.chat.completions.with_raw_response.create(
        model="agent", messages=USER, stream=stream)
    if stream:
        chunks = [c async for c in raw.parse()]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert all(c.choices for c in chunks), "the usage chunk the gateway asked for is dropped"
        assert text.strip() == TEXT
    else:
        assert raw.parse().choices[0].message.content == TEXT
        assert no_key_in(raw.http_response.text)
    assert raw.headers["x-request-id"] == "req_fake_1"
    assert no_key_in(raw.headers)
    sent = upstream.seen[-1]
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    assert sent.headers["X-Team"] == "agents-test"  # [model] headers
    assert sent.body["model"] == "fake-model"  # alias "agent" resolved
    if stream:
        assert sent.body["stream_options"] == {"include_usage": True}
    call = http_gateway.recorder.calls[-1]
    assert (call.api, call.stream, call.status, call.error) == ("chat_completions", stream,
                                                                200, None)
    assert (call.requested_model, call.model) == ("agent", "fake-model")
    assert (call.input_tokens, call.output_tokens) == (CHAT_USAGE["prompt_tokens"],
                                                       CHAT_USAGE["completion_tokens"])
    assert call.finish_reason == "stop"
    assert call.response["choices"][0]["message"]["content"].strip() == TEXT
    assert call.request == {"model": "agent", "messages": USER, "stream": stream}
    assert no_key_in(call.to_dict())


async def test_a_chat_stream_that_asked_for_usage_gets_it(
        http_gateway: ModelGateway) -> None:
    chunks = [c async for c in await openai_client(http_gateway).chat.completions.create(
        model="fake-model", messages=USER, stream=True,
        stream_options={"include_usage": True})]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == CHAT_USAGE["prompt_tokens"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_responses_forwarded(http_gateway: ModelGateway, stream: bool) -> None:
    client = openai_client(http_gateway)
    if stream:
        async with client.responses.stream(model="fake-model", input="hello") as events:
            response = await events.get_final_response()
    else:
        response = await client.responses.create(model="fake-model", input="hello")
    assert response.output_text == TEXT
    call = http_gateway.recorder.calls[-1]
    assert (call.api, call.stream, call.finish_reason) == ("responses", stream, "completed")
    assert (call.input_tokens, call.output_tokens) == (RESPONSES_USAGE["input_tokens"],
                                                       RESPONSES_USAGE["output_tokens"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_anthropic_messages_forwarded_with_x_api_key(
        http_gateway: ModelGateway, fake: Fake, stream: bool) -> None:
    upstream, _ = fake
    client = anthropic_client(http_gateway)
    kwargs: dict[str, Any] = dict(model="fake-model", max_tokens=50, messages=USER)
    if stream:
        async with client.messages.stream(**kwargs) as events:
            message = await events.get_final_message()
    else:
        message = await client.messages.create(**kwargs)
    assert message.content[0].text == TEXT  # type: ignore[union-attr]
    sent = upstream.seen[-1]
    assert sent.headers["x-api-key"] == KEY and "Authorization" not in sent.headers
    assert sent.headers["anthropic-version"]
    call = http_gateway.recorder.calls[-1]
    # input counts the cache tokens too; output is message_delta's cumulative count
    assert call.input_tokens == (MESSAGES_USAGE["input_tokens"]
                                 + MESSAGES_USAGE["cache_creation_input_tokens"]
                                 + MESSAGES_USAGE["cache_read_input_tokens"])
    assert call.output_tokens == MESSAGES_USAGE["output_tokens"]
    assert (call.finish_reason, call.model) == ("end_turn", "fake-model")
    assert call.response["content"] == [{"type": "text", "text": TEXT}]


async def test_models_are_listed_through_the_gateway(http_gateway: ModelGateway) -> None:
    models = await openai_client(http_gateway).models.list()
    assert [m.id for m in models.data] == ["fake-model"]


@pytest.mark.parametrize(("status", "error"), [(429, openai.RateLimitError),
                                               (401, openai.AuthenticationError),
                                               (503, openai.InternalServerError)])
async def test_upstream_failures_pass_through_with_their_status(
        http_gateway: ModelGateway, fake: Fake, status: int, error: type[Exception]) -> None:
    upstream, _ = fake
    upstream.fail_next(status, "slow down", headers={"retry-after": "7"})
    with pytest.raises(error) as caught:
        await openai_client(http_gateway).chat.completions.create(
            model="fake-model", messages=USER, stream=True)
    assert caught.value.status_code == status  # type: ignore[attr-defined]
    assert caught.value.response.headers["retry-after"] == "7"  # type: ignore[attr-defined]
    assert "slow down" in str(caught.value)
    call = http_gateway.recorder.calls[-1]
    assert call.status == status
    assert call.error == f"upstream answered HTTP {status}: rate_limit_error: slow down"
    assert http_gateway.recorder.totals().errors == 1


async def test_a_wrong_upstream_key_is_the_upstreams_401_not_the_gateways(
        fake: Fake) -> None:
    _, server = fake
    async with ModelGateway(HttpUpstream(server.url, "sk-wrong"), token=TOKEN,
                            host="127.0.0.1") as gateway:
        with pytest.raises(anthropic.AuthenticationError):
            await anthropic_client(gateway).messages.create(model="m", max_tokens=5,
                                                            messages=USER)
        call = gateway.recorder.calls[-1]
        assert call.status == 401
        assert call.error is not None and call.error.startswith("upstream answered HTTP 401")


async def test_an_unreachable_upstream_is_a_502_saying_so() -> None:
    port = free_port()
    async with ModelGateway(HttpUpstream(f"http://127.0.0.1:{port}/v1", KEY), token=TOKEN,
                            host="127.0.0.1") as gateway:
        with pytest.raises(openai.InternalServerError) as caught:
            await openai_client(gateway).chat.completions.create(model="m", messages=USER)
        assert caught.value.status_code == 502
        assert f"model upstream unreachable: http://127.0.0.1:{port}/v1" in str(caught.value)
        with pytest.raises(anthropic.InternalServerError) as anthropic_caught:
            await anthropic_client(gateway).messages.create(model="m", max_tokens=5,
                                                            messages=USER, stream=True)
        assert anthropic_caught.value.status_code == 502
        assert [(c.status, (c.error or "").split(":")[0]) for c in gateway.recorder.calls] == [
            (502, "upstream unreachable")] * 2
        assert no_key_in(caught.value.body, anthropic_caught.value.body)


async def test_the_agent_token_is_never_forwarded_and_a_wrong_one_never_reaches_upstream(
        http_gateway: ModelGateway, fake: Fake) -> None:
    upstream, _ = fake
    with pytest.raises(openai.AuthenticationError):
        await openai_client(http_gateway, "sk-guess").chat.completions.create(
            model="m", messages=USER)
    assert upstream.seen == []
    await openai_client(http_gateway).chat.completions.create(model="m", messages=USER)
    assert all(TOKEN not in str(seen.headers) for seen in upstream.seen)


async def test_health_needs_no_token_and_models_do(http_gateway: ModelGateway) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{http_gateway.url}/healthz") as health:
            assert health.status == 200
        async with http.get(f"{http_gateway.url}/v1/models") as models:
            assert models.status == 401
            assert (await models.json())["error"]["code"] == "invalid_api_key"


def test_client_env_points_sdks_at_the_gateway_with_the_token_only(
        http_gateway: ModelGateway) -> None:
    env = http_gateway.client_env("http://gateway.internal:9000")
    assert env["OPENAI_BASE_URL"] == "http://gateway.internal:9000/v1"
    assert env["ANTHROPIC_BASE_URL"] == "http://gateway.internal:9000"
    assert {env["OPENAI_API_KEY"], env["ANTHROPIC_API_KEY"], env["LITELLM_API_KEY"]} == {TOKEN}
    assert no_key_in(env, repr(http_gateway.upstream))


@pytest.mark.parametrize("api", ["chat_completions", "responses", "messages"])
async def test_an_upstream_dying_mid_stream_is_an_error_to_the_agent_and_in_the_record(
        http_gateway: ModelGateway, fake: Fake, api: str) -> None:
    upstream, _ = fake
    upstream.break_streams = True
    with pytest.raises((anthropic.APIError, openai.APIError)) as caught:
        if api == "messages":
            async with anthropic_client(http_gateway).messages.stream(
                    model="m", max_tokens=5, messages=USER) as events:
                await events.get_final_message()
        elif api == "responses":
            async with openai_client(http_gateway).responses.stream(
                    model="m", input="hi") as events:
                await events.get_final_response()
        else:
            async for _ in await openai_client(http_gateway).chat.completions.create(
                    model="m", messages=USER, stream=True):
                pass
    assert "model gateway" not in str(caught.value)
    assert "the stream broke off" in str(caught.value)
    await asyncio.sleep(0.05)  # the gateway records once its side has finished
    call = http_gateway.recorder.calls[-1]
    assert (call.api, call.status, call.stream) == (api, 200, True)
    assert call.error is not None and call.error.startswith(
        "upstream unreachable: the stream broke off"), call.error
    if api == "messages":
        assert call.input_tokens == 333  # message_start had arrived


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_caller_with_its_own_upstream_key_is_forwarded_with_it(
        http_gateway: ModelGateway, fake: Fake, stream: bool) -> None:
    """``--judge-litellm-api-key``: the judge's calls go upstream with its key, the agent's
    with the gateway's, and neither key shows in the records."""
    upstream, _ = fake
    judge_key = OTHER_KEY
    http_gateway.add_caller("judge", "judge-token", judge_key)
    http_gateway.add_caller("agent-2", "agent-token")
    for token in ("judge-token", "agent-token", TOKEN):
        response = await openai_client(http_gateway, token).chat.completions.create(
            model="agent", messages=USER, stream=stream)
        if stream:
            assert [c async for c in response]  # type: ignore[union-attr]
    sent = [seen.headers["Authorization"] for seen in upstream.seen[-3:]]
    assert sent == [f"Bearer {judge_key}", f"Bearer {KEY}", f"Bearer {KEY}"]
    calls = http_gateway.recorder.calls[-3:]
    assert [c.caller for c in calls] == ["judge", "agent-2", None]
    assert all(judge_key not in str(c.to_dict()) for c in calls)

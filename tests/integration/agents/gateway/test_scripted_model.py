"""The scripted model through a real model gateway, driven by the official SDKs: whole agent
loops (text, tool calls, tool results) in Chat Completions, Responses and Anthropic Messages,
each streamed and not, and the scripted model named as such wherever it shows."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai
import pytest
from gateway_helpers import TOKEN, anthropic_client, openai_client

from agentenv_agents.model_gateway import ModelGateway
from agentenv_agents.records import CallRecorder

MODEL = "scripted:fix-bug"
FILE = "import sys\n\ndef main():\n    return 1 / 0\n"
CHAT_TOOLS = [{"type": "function", "function": {
    "name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("read_file", "write_file")]


def tool_result(name: str) -> str:
    return FILE if name == "read_file" else "written"


# -- Chat Completions --------------------------------------------------------------------------

async def chat_turn(client: openai.AsyncOpenAI, messages: list[dict[str, Any]],
                    stream: bool) -> tuple[str | None, list[dict[str, Any]], str | None, str]:
    """One call; returns (text, tool calls, finish reason, model), streamed or not."""
    if not stream:
        done = await client.chat.completions.create(model="gpt-test", messages=messages,
                                                    tools=CHAT_TOOLS)
        message = done.choices[0].message
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                 for c in message.tool_calls or []]
        return message.content, calls, done.choices[0].finish_reason, done.model
    text, calls, finish, model = "", {}, None, ""
    stream_ = await client.chat.completions.create(model="gpt-test", messages=messages,
                                                   tools=CHAT_TOOLS, stream=True)
    async for chunk in stream_:
        model = chunk.model
        assert chunk.choices, "no usage-only chunk unless the agent asked for one"
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        for call in choice.delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = call.id or entry["id"]
            entry["name"] += call.function.name or ""
            entry["arguments"] += call.function.arguments or ""
        finish = choice.finish_reason or finish
    return text or None, [calls[i] for i in sorted(calls)], finish, model


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_chat_completions_agent_loop_with_tool_calls(
        scripted_gateway: ModelGateway, stream: bool) -> None:
    client = openai_client(scripted_gateway)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the bug in app.py"}]
    seen = []
    for _ in range(4):
        text, calls, finish, model = await chat_turn(client, messages, stream)
        assert model == MODEL
        seen.append((text, [(c["name"], json.loads(c["arguments"])) for c in calls], finish))
        messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]
            or None})
        if not calls:
            messages.append({"role": "user", "content": "go on"})
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": tool_result(call["name"])})
    assert seen == [
        ("Let me look at the file.", [], "stop"),
        (None, [("read_file", {"path": "app.py"})], "tool_calls"),
        ("Found main, fixing it.",
         [("write_file", {"path": "app.py", "text": "def main(): pass"})], "tool_calls"),
        ("Done: main is fixed.", [], "stop"),
    ]
    calls = scripted_gateway.recorder.calls
    assert [(c.api, c.stream, c.status, c.model, c.finish_reason) for c in calls] == [
        ("chat_completions", stream, 200, MODEL, f) for _, _, f in seen]
    assert all(c.upstream == MODEL and c.requested_model == "gpt-test" for c in calls)
    # the scripted token rule: whitespace words; "Found main, fixing it." = 4 words, plus
    # write_file (1) and its arguments' JSON (6)
    assert calls[2].output_tokens == 4 + 1 + len(json.dumps(
        {"path": "app.py", "text": "def main(): pass"}).split())
    assert all(c.input_tokens and c.input_tokens > 0 for c in calls)
    assert calls[3].input_tokens > calls[0].input_tokens


async def test_chat_stream_keeps_usage_when_the_agent_asks(
        scripted_gateway: ModelGateway) -> None:
    client = openai_client(scripted_gateway)
    chunks = [c async for c in await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "one two three"}], stream=True,
        stream_options={"include_usage": True})]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    usage = chunks[-1].usage
    call = scripted_gateway.recorder.calls[-1]
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        call.input_tokens, call.output_tokens) == (4, 6)  # "user one two three"; the reply


# -- Responses ---------------------------------------------------------------------------------

RESPONSE_TOOLS = [{"type": "function", "name": name, "parameters": {
    "type": "object", "properties": {}}, "strict": False} for name in ("read_file", "write_file")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_responses_agent_loop_with_function_calls(
        scripted_gateway: ModelGateway, stream: bool) -> None:
    client = openai_client(scripted_gateway)
    items: list[Any] = [{"role": "user", "content": "Fix the bug in app.py"}]
    texts, tools = [], []
    for _ in range(4):
        if stream:
            async with client.responses.stream(model="gpt-test", input=items,
                                               tools=RESPONSE_TOOLS) as events:
                deltas = [e.delta async for e in events if e.type == "response.output_text.delta"]
                response = await events.get_final_response()
            assert "".join(deltas) == response.output_text
        else:
            response = await client.responses.create(model="gpt-test", input=items,
                                                     tools=RESPONSE_TOOLS)
        assert response.model == MODEL and response.status == "completed"
        texts.append(response.output_text)
        calls = [o for o in response.output if o.type == "function_call"]
        tools.append([(c.name, json.loads(c.arguments)) for c in calls])
        items += [o.model_dump(exclude_none=True) for o in response.output]
        items += [{"type": "function_call_output", "call_id": c.call_id,
                   "output": tool_result(c.name)} for c in calls]
        if not calls:
            items.append({"role": "user", "content": "go on"})
    assert texts == ["Let me look at the file.", "", "Found main, fixing it.",
                     "Done: main is fixed."]
    assert tools[1] == [("read_file", {"path": "app.py"})]
    assert tools[2][0][0] == "write_file"
    records = scripted_gateway.recorder.calls
    assert [(r.api, r.stream, r.model, r.finish_reason) for r in records] == [
        ("responses", stream, MODEL, "completed")] * 4
    assert all(r.output_tokens and r.input_tokens for r in records)


async def test_responses_previous_response_id_continues_the_script(
        scripted_gateway: ModelGateway) -> None:
    client = openai_client(scripted_gateway)
    first = await client.responses.create(model="m", input="Fix the bug")
    second = await client.responses.create(model="m", input="go on",
                                           previous_response_id=first.id)
    assert first.output_text == "Let me look at the file."
    assert second.output[0].type == "function_call"


# -- Anthropic Messages ------------------------------------------------------------------------

ANTHROPIC_TOOLS = [{"name": name, "input_schema": {"type": "object", "properties": {}}}
                   for name in ("read_file", "write_file")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_anthropic_messages_agent_loop_with_tool_use(
        scripted_gateway: ModelGateway, stream: bool) -> None:
    client = anthropic_client(scripted_gateway)
    messages: list[Any] = [{"role": "user", "content": "Fix the bug in app.py"}]
    seen = []
    for _ in range(4):
        kwargs: dict[str, Any] = dict(model="claude-test", max_tokens=1024, messages=messages,
                                      tools=ANTHROPIC_TOOLS, system="You fix bugs.")
        if stream:
            async with client.messages.stream(**kwargs) as events:
                text = "".join([t async for t in events.text_stream])
                message = await events.get_final_message()
            assert text == "".join(b.text for b in message.content if b.type == "text")
        else:
            message = await client.messages.create(**kwargs)
        assert message.model == MODEL
        uses = [b for b in message.content if b.type == "tool_use"]
        seen.append(([b.text for b in message.content if b.type == "text"],
                     [(u.name, u.input) for u in uses], message.stop_reason))
        messages.append({"role": "assistant",
                         "content": [b.model_dump(exclude_none=True) for b in message.content]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u.id, "content": tool_result(u.name)}
            for u in uses] or "go on"})
    assert seen == [
        (["Let me look at the file."], [], "end_turn"),
        ([], [("read_file", {"path": "app.py"})], "tool_use"),
        (["Found main, fixing it."],
         [("write_file", {"path": "app.py", "text": "def main(): pass"})], "tool_use"),
        (["Done: main is fixed."], [], "end_turn"),
    ]
    records = scripted_gateway.recorder.calls
    assert [(r.api, r.stream, r.model, r.finish_reason) for r in records] == [
        ("messages", stream, MODEL, reason) for _, _, reason in seen]
    assert records[0].output_tokens == 6  # "Let me look at the file."


async def test_anthropic_count_tokens_uses_the_scripted_rule(
        scripted_gateway: ModelGateway) -> None:
    client = anthropic_client(scripted_gateway)
    counted = await client.messages.count_tokens(
        model="m", messages=[{"role": "user", "content": "three little words"}])
    assert counted.input_tokens == 4  # "user" + three words
    assert scripted_gateway.recorder.calls == []  # not a model call


# -- named as such, and its faults -------------------------------------------------------------

async def test_the_scripted_model_is_named_as_such(scripted_gateway: ModelGateway) -> None:
    models = await openai_client(scripted_gateway).models.list()
    assert [m.id for m in models.data] == [MODEL]
    anthropic_models = await anthropic_client(scripted_gateway).models.list()
    assert [m.id for m in anthropic_models.data] == [MODEL]
    assert scripted_gateway.upstream.name == MODEL


async def test_running_out_of_turns_is_a_one_line_error(scripted_gateway: ModelGateway) -> None:
    history: list[Any] = []
    for _ in range(4):
        history += [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]
    history.append({"role": "user", "content": "more?"})
    with pytest.raises(openai.BadRequestError) as caught:
        await openai_client(scripted_gateway).chat.completions.create(model="m",
                                                                      messages=history)
    message = caught.value.body["message"]  # type: ignore[index]
    assert "\n" not in message
    assert message.startswith("scripted model 'fix-bug' (")
    assert message.endswith("fix-bug.json) has no turn 5: the script has 4 turns")
    record = scripted_gateway.recorder.calls[-1]
    assert record.status == 400 and record.error == f"scripted: {message}"


async def test_a_failed_match_names_the_turn_and_what_it_saw(
        scripted_gateway: ModelGateway) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "Let me look at the file."},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file",
                                           "input": {"path": "app.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "no such file"}]},
    ]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await anthropic_client(scripted_gateway).messages.create(
            model="m", max_tokens=10, messages=messages, stream=False)
    assert "turn 3: expected the latest tool result to contain 'def main' " \
           "(it is 'no such file')" in str(caught.value)


async def test_the_record_file_holds_every_call(scripted_gateway: ModelGateway) -> None:
    client = openai_client(scripted_gateway)
    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    await client.responses.create(model="m", input="a")
    assert scripted_gateway.recorder.path is not None
    stored = CallRecorder.read(scripted_gateway.recorder.path)
    assert [c.to_dict() for c in stored] == [c.to_dict() for c in scripted_gateway.recorder.calls]
    assert scripted_gateway.recorder.totals().calls == 2
    assert stored[0].request == {"model": "m", "messages": [{"role": "user", "content": "a"}]}


async def test_a_wrong_or_missing_token_is_a_401_in_each_apis_shape(
        scripted_gateway: ModelGateway) -> None:
    with pytest.raises(openai.AuthenticationError) as chat:
        await openai_client(scripted_gateway, "wrong").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "a"}])
    assert chat.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(anthropic.AuthenticationError) as messages:
        await anthropic_client(scripted_gateway, "wrong").messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "a"}])
    assert messages.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    # Anthropic's bearer form (auth_token) is accepted too
    bearer = anthropic.AsyncAnthropic(base_url=scripted_gateway.url, auth_token=TOKEN,
                                      max_retries=0)
    answer = await bearer.messages.create(model="m", max_tokens=5,
                                          messages=[{"role": "user", "content": "a"}])
    assert answer.model == MODEL
    assert [(c.status, (c.error or "")[:8]) for c in scripted_gateway.recorder.calls] == [
        (401, "gateway:"), (401, "gateway:"), (200, "")]


async def test_concurrent_conversations_each_get_their_own_turn(
        scripted_gateway: ModelGateway) -> None:
    client = openai_client(scripted_gateway)

    async def ask(turns_done: int) -> str | None:
        history: list[Any] = [{"role": "user", "content": "go"}]
        for _ in range(turns_done):
            history += [{"role": "assistant", "content": "ok"},
                        {"role": "tool", "tool_call_id": "x", "content": "def main"}]
        done = await client.chat.completions.create(model="m", messages=history)
        message = done.choices[0].message
        return message.content or message.tool_calls[0].function.name  # type: ignore[index]

    answers = await asyncio.gather(*(ask(i % 4) for i in range(40)))
    expected = ["Let me look at the file.", "read_file", "Found main, fixing it.",
                "Done: main is fixed."]
    assert answers == [expected[i % 4] for i in range(40)]
    assert scripted_gateway.recorder.totals().calls == 40


async def test_each_caller_token_is_accepted_and_recorded_as_its_own(
        scripted_gateway: ModelGateway) -> None:
    """Agents sharing one gateway each call with a token of their own, so the records say whose
    call each was; an unknown token is still refused, and the run token stays anonymous."""
    scripted_gateway.add_caller("agent-a", "token-of-a-000")
    scripted_gateway.add_caller("agent-b", "token-of-b-000")
    for token in ("token-of-a-000", "token-of-b-000", TOKEN):
        await openai_client(scripted_gateway, token).chat.completions.create(
            model="scripted:fix-bug", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.AuthenticationError):
        await openai_client(scripted_gateway, "token-of-nobody").chat.completions.create(
            model="scripted:fix-bug", messages=[{"role": "user", "content": "hi"}])
    callers = [c.caller for c in scripted_gateway.recorder.calls]
    assert callers == ["agent-a", "agent-b", None, None]
    with pytest.raises(ValueError):
        scripted_gateway.add_caller("agent-c", TOKEN)  # the run token is not a caller's


async def test_fail_first_answers_errors_the_client_retries_then_the_turn(
        tmp_path: Any) -> None:
    from agentenv_agents.scripted import Script, ScriptedUpstream

    script = Script.from_dict({"name": "flaky", "turns": [
        {"fail_first": [429, 500], "text": "third time lucky"}]})
    recorder = CallRecorder(tmp_path / "calls.jsonl")
    gateway = ModelGateway(ScriptedUpstream(script), token=TOKEN, host="127.0.0.1",
                           recorder=recorder)
    await gateway.start()
    try:
        # the official SDK's own retries (it honours the 429's Retry-After: 1)
        client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=TOKEN, max_retries=2)
        done = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
        assert done.choices[0].message.content == "third time lucky"
        assert [c.status for c in recorder.calls] == [429, 500, 200]
        assert recorder.calls[0].error == ("scripted: scripted model 'flaky', turn 1: scripted "
                                           "failure 1 of 2 (HTTP 429)")
        # counted per gateway: the same turn asked again answers at once
        again = await openai_client(gateway).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
        assert again.choices[0].message.content == "third time lucky"
    finally:
        await gateway.stop()
        recorder.close()


def test_fail_first_takes_only_error_statuses() -> None:
    from agentenv_agents.scripted import Script, ScriptError

    with pytest.raises(ScriptError, match=r"turn 1: fail_first takes HTTP error statuses "
                                          r"\(400-599\), got \[200\]"):
        Script.from_dict({"turns": [{"fail_first": [200], "text": "x"}]})

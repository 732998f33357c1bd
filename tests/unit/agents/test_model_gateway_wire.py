"""The model gateway's and the scripted model's pure parts, no sockets: reading streams back
into responses, dropping the usage chunk the gateway asked for, script files, and how the
scripted model finds its place in a conversation."""

from __future__ import annotations

import json

import pytest

from agentenv_agents.model_gateway import _drop_usage_only, _with_usage
from agentenv_agents.records import CallRecorder, ModelCall
from agentenv_agents.scripted import Script, ScriptError, count_words, read_conversation
from agentenv_agents.wire import assemble_stream, error_body, iter_sse, sse


def test_iter_sse_reads_crlf_events_multiline_data_and_comments() -> None:
    raw = b": keep-alive\r\nevent: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\ndata: [DONE]\n\n"
    assert list(iter_sse(raw)) == [("a", '{"x":\n1}'), (None, "[DONE]")]


def test_a_chat_stream_with_tool_call_deltas_assembles_into_one_completion() -> None:
    head = {"id": "c1", "model": "gpt-x", "object": "chat.completion.chunk"}
    raw = b"".join([
        sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi "}}]}),
        sse({**head, "choices": [{"index": 0, "delta": {"content": "there"}}]}),
        sse({**head, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": "ls", "arguments": "{\"p"}}]}}]}),
        sse({**head, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "\": 1}"}}]}}]}),
        sse({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        sse({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}),
        sse("[DONE]"),
    ])
    response, summary = assemble_stream("chat_completions", raw)
    message = response["choices"][0]["message"]
    assert message["content"] == "Hi there"
    assert message["tool_calls"] == [{"id": "call_1", "type": "function",
                                      "function": {"name": "ls", "arguments": "{\"p\": 1}"}}]
    assert (summary.model, summary.input_tokens, summary.output_tokens,
            summary.finish_reason) == ("gpt-x", 3, 4, "tool_calls")


def test_an_anthropic_stream_assembles_blocks_and_takes_usage_from_start_and_delta() -> None:
    raw = b"".join([
        sse({"type": "message_start", "message": {"id": "m", "model": "claude-x", "content": [],
             "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}},
            "message_start"),
        sse({"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "t", "name": "ls", "input": {}}}),
        sse({"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
        sse({"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": "2}"}}),
        sse({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
             "usage": {"output_tokens": 9}}),
    ])
    response, summary = assemble_stream("messages", raw)
    assert response["content"] == [{"type": "tool_use", "id": "t", "name": "ls",
                                    "input": {"a": 2}}]
    assert (summary.input_tokens, summary.output_tokens, summary.finish_reason) == (
        15, 9, "tool_use")


def test_an_error_event_in_a_stream_is_reported() -> None:
    raw = sse({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
              "error")
    _, summary = assemble_stream("messages", raw)
    assert summary.error == "overloaded_error: busy"


def test_a_cut_off_responses_stream_keeps_the_items_that_finished() -> None:
    raw = b"".join([
        sse({"type": "response.created", "response": {"id": "r", "status": "in_progress",
                                                      "output": [], "model": "o"}}),
        sse({"type": "response.output_item.done", "output_index": 0,
             "item": {"type": "message", "content": []}}),
    ])
    response, summary = assemble_stream("responses", raw)
    assert response["output"] == [{"type": "message", "content": []}]
    assert summary.finish_reason == "in_progress" and summary.output_tokens is None


def test_the_usage_only_chunk_is_dropped_even_split_across_reads() -> None:
    usage = sse({"choices": [], "usage": {"prompt_tokens": 1}})
    data = sse({"choices": [{"delta": {"content": "x"}}], "usage": None})
    stream = data + usage + sse("[DONE]")
    sent, pending = b"", b""
    for at in range(0, len(stream), 7):
        pending += stream[at:at + 7]
        out, pending = _drop_usage_only(pending)
        sent += out
    assert sent + pending == data + sse("[DONE]")


def test_asking_for_usage_splices_the_raw_body_or_keeps_other_options() -> None:
    body = {"model": "m", "stream": True}
    changed, raw = _with_usage(body, json.dumps(body).encode())
    assert json.loads(raw) == changed == {**body, "stream_options": {"include_usage": True}}
    body = {"model": "m", "stream": True, "stream_options": {"other": 1}}
    changed, raw = _with_usage(body, json.dumps(body).encode())
    assert json.loads(raw)["stream_options"] == {"other": 1, "include_usage": True}


def test_error_bodies_take_each_apis_shape() -> None:
    assert error_body("messages", 429, "slow")["error"] == {"type": "rate_limit_error",
                                                            "message": "slow"}
    assert error_body("responses", 502, "down")["error"]["type"] == "server_error"


def test_records_round_trip_and_total(tmp_path) -> None:
    recorder = CallRecorder(tmp_path / "calls.jsonl")
    recorder.record(ModelCall(api="messages", upstream="u", requested_model="a", model="b",
                              stream=True, status=200, input_tokens=3, output_tokens=4))
    recorder.record(ModelCall(api="responses", upstream="u", requested_model=None, model=None,
                              stream=False, status=429, error="upstream answered HTTP 429"))
    recorder.close()
    assert CallRecorder.read(tmp_path / "calls.jsonl") == recorder.calls
    assert recorder.totals().to_dict() == {"calls": 2, "errors": 1, "input_tokens": 3,
                                           "output_tokens": 4}



@pytest.mark.parametrize("raw", [
    b'{"model": "m",\r\n  "messages": [{"role": "user", "content": "line one\\nline \xc3\xa9"}]}\n',
    b'  {"model":"m","messages":[]}  ',
    '{"model": "m", "messages": []}'.encode("utf-16"),  # not UTF-8: encoded again instead
    b'\xef\xbb\xbf{"model": "m", "messages": []}',  # a BOM: encoded again instead
], ids=["pretty-printed", "padded", "utf-16", "bom"])
def test_a_request_is_kept_as_sent_and_reads_back_the_same(tmp_path, raw: bytes) -> None:
    """The gateway hands the recorder the body as the agent sent it, to write as it is (no
    second encoding of a long history); each line stays one JSON object holding the request."""
    request = json.loads(raw)
    recorder = CallRecorder(tmp_path / "calls.jsonl")
    call = ModelCall(api="chat_completions", upstream="u", requested_model="m", model="m",
                     stream=False, status=200, request=request, response={"ok": True})
    recorder.record(call, raw)
    recorder.close()
    lines = (tmp_path / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert [c.request for c in CallRecorder.read(tmp_path / "calls.jsonl")] == [request]
    assert recorder.calls == [call]

# -- scripts -----------------------------------------------------------------------------------

def test_a_toml_script_loads_with_its_file_name(tmp_path) -> None:
    path = tmp_path / "demo.toml"
    path.write_text('[[turns]]\ntext = "hi"\n[[turns]]\n'
                    '[[turns.tool_calls]]\nname = "ls"\narguments = { path = "." }\n')
    script = Script.load(path)
    assert script.model == "scripted:demo"
    assert script.turns[1].tool_calls[0].arguments == {"path": "."}


@pytest.mark.parametrize(("data", "says"), [
    ({"turns": []}, "no turns"),
    ({"turns": [{"match": {"last_user_contains": "x"}}]}, "turn 1 has neither text"),
    ({"turns": [{"text": "a", "colour": "red"}]}, "colour"),
    ({"turns": [{"tool_calls": [{"name": "x", "arguments": 3}]}]}, "arguments"),
    ([], "is an object"),
])
def test_a_bad_script_is_one_line_naming_the_file(data: object, says: str) -> None:
    with pytest.raises(ScriptError) as caught:
        Script.from_dict(data, path="demo.json")
    message = str(caught.value)
    assert message.startswith("demo.json: ") and says in message and "\n" not in message


def test_an_unreadable_script_is_one_line(tmp_path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ScriptError, match=r"bad.json: cannot read the script") as caught:
        Script.load(path)
    assert "\n" not in str(caught.value)


def test_responses_input_counts_runs_of_assistant_items_as_one_turn() -> None:
    items = [
        {"role": "user", "content": "go"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                               "text": "ok"}]},
        {"type": "function_call", "call_id": "c", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "a.py b.py"},
        {"type": "function_call", "call_id": "d", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "d", "output": [{"type": "input_text",
                                                                     "text": "c.py"}]},
    ]
    seen = read_conversation("responses", {"input": items, "tools": [
        {"type": "function", "name": "ls"}]}, earlier_turns=2)
    assert (seen.assistant_turns, seen.last_tool_result, seen.last_user, seen.tools) == (
        4, "c.py", "go", ["ls"])


def test_the_system_prompt_is_read_in_each_api() -> None:
    chat = read_conversation("chat_completions", {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]})
    anthropic = read_conversation("messages", {"system": [{"type": "text", "text": "Be brief."}],
                                               "messages": [{"role": "user", "content": "hi"}]})
    responses = read_conversation("responses", {"instructions": "Be brief.", "input": [
        {"role": "developer", "content": "Use tools."}, {"role": "user", "content": "hi"}]})
    assert (chat.system, anthropic.system) == ("Be brief.", "Be brief.")
    assert responses.system == "Be brief.\nUse tools."
    alone = read_conversation("chat_completions", {"messages": [{"role": "user", "content": "x"}]})
    assert alone.system is None


def test_count_words_counts_every_string_inside() -> None:
    assert count_words({"a": "one two", "b": ["three", {"c": " four  five "}], "d": 3}) == 5

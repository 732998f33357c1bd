"""The scripted model (``scripted``): answers read from a script file, for tests and offline
demos. It is never a silent stand-in: every answer names it as its model,
``scripted:<script name>``, and the gateway records it as the upstream ``scripted:<name>``.

It is an :class:`~agentenv_agents.model_gateway.Upstream`, so the model gateway serves it like
any provider, in all four APIs (Chat Completions, Responses, Messages, Gemini's
generateContent), streamed or not, and the same agents and CLIs run against it.

A script (JSON, or TOML with ``[[turns]]``)::

    {
      "name": "fix-bug",                        # optional; default: the file's stem
      "turns": [
        {"text": "Let me look at the file."},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "app.py"}}]},
        {"match": {"last_tool_result_contains": "def main"},
         "text": "Found it.",
         "tool_calls": [{"name": "write_file", "arguments": {"path": "app.py", "text": "..."}}]},
        {"text": "Done."}
      ]
    }

A turn has ``text``, ``tool_calls`` or both (``arguments`` an object, or a JSON string passed
as is), and may wait ``delay_seconds`` before answering (a slow or hung model). ``fail_first``
lists HTTP statuses the turn answers with before it answers for real, one per request that
reaches it (``[429, 500]``: a rate limit, then an outage, for the retries of an agent's
client; a 429 or 503 says ``Retry-After: 1``); that count is the one state a script keeps, per
gateway. Turns are
consumed in order per conversation, with no state: the next turn is the number of assistant
turns already in the request's history (for the Responses API, a run of consecutive assistant
items is one turn, and a ``previous_response_id`` this model issued adds the turns before it;
for Gemini, each ``model`` content is one).
``match`` is a check on the conversation before answering, each key optional:
``last_tool_result_contains`` (the latest tool result), ``last_user_contains`` (the latest user
text), ``system_contains`` (the system prompt: system and developer messages, the Messages API's
``system``, the Responses API's ``instructions``, Gemini's ``systemInstruction``),
``tool_offered`` (a tool of that name is in the request's ``tools``; a tool inside a Responses
``namespace`` tool, as Codex offers MCP tools, is named ``<namespace>__<tool>``, and a call to
it is answered with its ``namespace`` and own ``name``). A failed check or a script that has run
out of turns answers HTTP 400 in the API's error shape, with one line naming the script and the
turn.

Usage numbers are honest about being counted, not tokenized: a token here is a
whitespace-separated word. Input tokens are the words in every string value of the request's
conversation fields (``messages``, ``input``, ``system``, ``instructions``, ``tools``,
``contents``, ``systemInstruction``); output
tokens the words of the answer's text plus, per tool call, the words of its name and of its
arguments' JSON.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import time
import tomllib
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import cattrs

from .model_gateway import UpstreamReply, UpstreamRequest, json_reply
from .records import Api
from .wire import error_body, sse

_converter = cattrs.Converter(forbid_extra_keys=True)


def _arguments(value: Any, _: Any) -> dict[str, Any] | str:
    if isinstance(value, dict | str):
        return value
    raise ValueError(f"tool call arguments are an object or a JSON string, not {value!r}")


_converter.register_structure_hook(dict[str, Any] | str, _arguments)
_WORDS = re.compile(r"\S+\s*|\s+")
_REMEMBERED_RESPONSES = 10_000


class ScriptError(ValueError):
    """A script file that cannot be used; the message is one line naming the file."""


@attrs.define(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] | str = attrs.field(factory=dict)

    @property
    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)

    @property
    def arguments_object(self) -> Any:
        if isinstance(self.arguments, str):
            try:
                return json.loads(self.arguments)
            except ValueError:
                return {"arguments": self.arguments}
        return self.arguments


@attrs.define(frozen=True)
class Match:
    last_tool_result_contains: str | None = None
    last_user_contains: str | None = None
    system_contains: str | None = None
    tool_offered: str | None = None


@attrs.define(frozen=True)
class Turn:
    text: str | None = None
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    match: Match | None = None
    #: Seconds to wait before answering (a slow or hung model, for timeout and cancel tests).
    delay_seconds: float = 0.0
    #: HTTP statuses answered, one per request reaching this turn, before its real answer.
    fail_first: list[int] = attrs.field(factory=list)


@attrs.define(frozen=True)
class Script:
    """A loaded script; ``model`` is the name its answers carry."""

    turns: list[Turn]
    name: str = "script"
    path: str | None = None

    @property
    def model(self) -> str:
        return f"scripted:{self.name}"

    @property
    def where(self) -> str:
        return f"scripted model {self.name!r}" + (f" ({self.path})" if self.path else "")

    @classmethod
    def from_dict(cls, data: Any, *, name: str | None = None,
                  path: str | None = None) -> Script:
        label = path or name or "script"
        if not isinstance(data, dict):
            raise ScriptError(f"{label}: a script is an object with 'turns'")
        data = dict(data)
        data.setdefault("name", name or "script")
        data["path"] = path
        try:
            script = _converter.structure(data, cls)
        except Exception as exc:  # cattrs raises grouped errors; say them on one line
            problems = "; ".join(cattrs.transform_error(exc)) if isinstance(
                exc, cattrs.BaseValidationError) else str(exc)
            raise ScriptError(f"{label}: {problems}") from None
        if not script.turns:
            raise ScriptError(f"{label}: the script has no turns")
        for number, turn in enumerate(script.turns, 1):
            if turn.text is None and not turn.tool_calls:
                raise ScriptError(f"{label}: turn {number} has neither text nor tool_calls")
            if any(not 400 <= status <= 599 for status in turn.fail_first):
                raise ScriptError(f"{label}: turn {number}: fail_first takes HTTP error "
                                  f"statuses (400-599), got {turn.fail_first}")
        return script

    @classmethod
    def load(cls, path: str | Path) -> Script:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (OSError, ValueError) as exc:
            raise ScriptError(f"{path}: cannot read the script: {exc}".splitlines()[0]) from None
        return cls.from_dict(data, name=path.stem, path=str(path))


def count_words(value: Any) -> int:
    """Whitespace-separated words in every string inside ``value`` (the scripted model's
    token rule)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(count_words(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_words(v) for v in value)
    return 0


_CONVERSATION = {"chat_completions": ("messages", "tools"),
                 "responses": ("instructions", "input", "tools"),
                 "messages": ("system", "messages", "tools"),
                 "generate_content": ("systemInstruction", "contents", "tools")}


def _text_of(value: Any) -> str:
    """The text in a message content of any of the four APIs (string or list of parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_text_of(part) for part in value) if t)
    if isinstance(value, dict):
        for key in ("text", "content", "output", "parts"):
            if key in value:
                return _text_of(value[key])
    return ""


@attrs.define
class Conversation:
    """What the scripted model reads from a request: where the conversation is, and what its
    ``match`` checks look at."""

    assistant_turns: int
    last_tool_result: str | None
    last_user: str | None
    tools: list[str]
    #: The system prompt, every part of it joined (None when there is none).
    system: str | None = None


def _tool_names(tools: Any) -> list[str]:
    """Every tool name offered; a Responses ``namespace`` tool (Codex groups each MCP server's
    tools so) offers ``<namespace>__<tool>`` for each tool inside it."""
    names = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            if tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
                names.extend(f"{tool['name']}__{inner}"
                             for inner in _tool_names(tool.get("tools")))
                continue
            if isinstance(tool.get("functionDeclarations"), list):  # Gemini: a group of them
                names.extend(_tool_names(tool["functionDeclarations"]))
                continue
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
            if isinstance(name, str):
                names.append(name)
    return names


def _namespaces(tools: Any) -> dict[str, tuple[str, str]]:
    """``{"mcp__echo__echo": ("mcp__echo", "echo")}`` for the tools inside Responses
    ``namespace`` tools: a call to one must name its namespace and its own name apart."""
    found: dict[str, tuple[str, str]] = {}
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "namespace" \
                and isinstance(tool.get("name"), str):
            for inner in _tool_names(tool.get("tools")):
                found[f"{tool['name']}__{inner}"] = (tool["name"], inner)
    return found


def read_conversation(api: Api, body: dict[str, Any], earlier_turns: int = 0) -> Conversation:
    seen = _read_turns(api, body, earlier_turns)
    return attrs.evolve(seen, system=_system_of(body))


def _system_of(body: dict[str, Any]) -> str | None:
    """What the request gives as the system prompt, in any of the four APIs."""
    parts = [_text_of(body.get(key)) for key in ("system", "instructions", "systemInstruction")
             if body.get(key)]
    for item in [*(body.get("messages") or []),
                 *(body.get("input") if isinstance(body.get("input"), list) else [])]:
        if isinstance(item, dict) and item.get("role") in ("system", "developer"):
            parts.append(_text_of(item.get("content")))
    joined = "\n".join(p for p in parts if p)
    return joined or None


def _read_turns(api: Api, body: dict[str, Any], earlier_turns: int = 0) -> Conversation:
    tools = _tool_names(body.get("tools"))
    turns = earlier_turns
    tool_result: str | None = None
    user: str | None = None
    if api == "generate_content":
        for content in body.get("contents") or []:
            if not isinstance(content, dict):
                continue
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            if content.get("role") == "model":
                turns += 1
                continue
            results = [p["functionResponse"] for p in parts
                       if isinstance(p.get("functionResponse"), dict)]
            if results:
                reply = results[-1].get("response")
                tool_result = _text_of(reply) or json.dumps(reply)
            texts = [p for p in parts if "text" in p]
            if texts:
                user = _text_of(texts)
        return Conversation(turns, tool_result, user, tools)
    if api == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return Conversation(turns, None, items, tools)
        in_assistant = False
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            kind = item.get("type", "message")
            assistant = (kind == "message" and item.get("role") == "assistant") or kind in (
                "function_call", "reasoning", "custom_tool_call", "web_search_call")
            if assistant and not in_assistant:
                turns += 1
            in_assistant = assistant
            if kind in ("function_call_output", "custom_tool_call_output"):
                tool_result = _text_of(item.get("output"))
            elif kind == "message" and item.get("role") == "user":
                user = _text_of(item.get("content"))
        return Conversation(turns, tool_result, user, tools)
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            turns += 1
        elif role == "tool":
            tool_result = _text_of(content)
        elif role == "user":
            if isinstance(content, list) and any(
                    isinstance(p, dict) and p.get("type") == "tool_result" for p in content):
                results = [p for p in content if isinstance(p, dict)
                           and p.get("type") == "tool_result"]
                tool_result = _text_of(results[-1].get("content"))
                rest = [p for p in content if p not in results]
                if rest:
                    user = _text_of(rest)
            else:
                user = _text_of(content)
    return Conversation(turns, tool_result, user, tools)


def _mismatch(match: Match, seen: Conversation) -> str | None:
    def show(text: str | None) -> str:
        if text is None:
            return "there is none"
        flat = " ".join(text.split())
        return f"it is {flat[:80]!r}" + ("..." if len(flat) > 80 else "")

    if match.last_tool_result_contains is not None and (
            seen.last_tool_result is None
            or match.last_tool_result_contains not in seen.last_tool_result):
        return (f"expected the latest tool result to contain "
                f"{match.last_tool_result_contains!r} ({show(seen.last_tool_result)})")
    if match.last_user_contains is not None and (
            seen.last_user is None or match.last_user_contains not in seen.last_user):
        return (f"expected the latest user message to contain {match.last_user_contains!r} "
                f"({show(seen.last_user)})")
    if match.system_contains is not None and (
            seen.system is None or match.system_contains not in seen.system):
        return (f"expected the system prompt to contain {match.system_contains!r} "
                f"({show(seen.system)})")
    if match.tool_offered is not None and match.tool_offered not in seen.tools:
        return (f"expected a tool named {match.tool_offered!r} in the request "
                f"(offered: {', '.join(seen.tools) or 'none'})")
    return None


def _pieces(text: str) -> list[str]:
    """Stream deltas: one word (with its trailing space) each."""
    return _WORDS.findall(text) or [text]


def _chunks(text: str, size: int = 16) -> Iterator[str]:
    for at in range(0, len(text), size):
        yield text[at:at + size]


class ScriptedUpstream:
    """The scripted model as an upstream of the model gateway."""

    def __init__(self, script: Script | str | Path) -> None:
        self.script = script if isinstance(script, Script) else Script.load(script)
        self.name = self.script.model
        self._response_turns: collections.OrderedDict[str, int] = collections.OrderedDict()
        #: turn index -> how many of its fail_first statuses were answered
        self._failed: collections.Counter[int] = collections.Counter()

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # -- the Upstream contract --------------------------------------------------------------

    async def send(self, request: UpstreamRequest) -> UpstreamReply:
        if request.path == "/models":
            return json_reply(200, self._models())
        body = request.body or {}
        if request.path == "/messages/count_tokens":
            return json_reply(200, {"input_tokens": self.input_tokens("messages", body)})
        if request.api == "generate_content" and request.path.endswith(":countTokens"):
            inner = body.get("generateContentRequest")
            counted = self.input_tokens(
                "generate_content", inner if isinstance(inner, dict) else body)
            return json_reply(200, {"totalTokens": counted})
        earlier = 0
        previous = body.get("previous_response_id")
        if request.api == "responses" and isinstance(previous, str):
            if previous not in self._response_turns:
                return self._refuse(request.api, 400, f"{self.script.where}: unknown "
                                    f"previous_response_id {previous!r}")
            earlier = self._response_turns[previous]
        seen = read_conversation(request.api, body, earlier)
        number = seen.assistant_turns + 1
        if seen.assistant_turns >= len(self.script.turns):
            return self._refuse(request.api, 400, f"{self.script.where} has no turn {number}: "
                                f"the script has {len(self.script.turns)} turns")
        turn = self.script.turns[seen.assistant_turns]
        if turn.match is not None and (why := _mismatch(turn.match, seen)):
            return self._refuse(request.api, 400, f"{self.script.where}, turn {number}: {why}")
        if self._failed[seen.assistant_turns] < len(turn.fail_first):
            status = turn.fail_first[self._failed[seen.assistant_turns]]
            self._failed[seen.assistant_turns] += 1
            reply = self._refuse(request.api, status, f"{self.script.where}, turn {number}: "
                                 f"scripted failure {self._failed[seen.assistant_turns]} of "
                                 f"{len(turn.fail_first)} (HTTP {status})")
            if status in (429, 503):
                reply.headers["Retry-After"] = "1"
            return reply
        if turn.delay_seconds > 0:
            await asyncio.sleep(turn.delay_seconds)
        answer = _Answer(turn, number, self.script.model, self.input_tokens(request.api, body))
        if request.api == "responses":
            self._remember(answer.response_id, number)
        render = {"chat_completions": (_chat_body, _chat_stream),
                  "responses": (_responses_body, _responses_stream),
                  "messages": (_messages_body, _messages_stream),
                  "generate_content": (_gemini_body, _gemini_stream)}[request.api]
        if request.api == "generate_content" and not request.stream \
                and ":streamGenerateContent" in request.path:  # no alt=sse: a JSON array
            return json_reply(200, [_gemini_body(answer, body)])
        if request.stream:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = render[1](answer, body, include_usage)
            return UpstreamReply(200, {"Content-Type": "text/event-stream"},
                                 chunks=_aiter(events))
        return json_reply(200, render[0](answer, body))

    # -- helpers ------------------------------------------------------------------------------

    def input_tokens(self, api: Api, body: dict[str, Any]) -> int:
        return sum(count_words(body.get(key)) for key in _CONVERSATION[api])

    def _refuse(self, api: Api, status: int, message: str) -> UpstreamReply:
        return json_reply(status, error_body(api, status, message), error=f"scripted: {message}")

    def _remember(self, response_id: str, turns: int) -> None:
        self._response_turns[response_id] = turns
        while len(self._response_turns) > _REMEMBERED_RESPONSES:
            self._response_turns.popitem(last=False)

    def _models(self) -> dict[str, Any]:
        """Both shapes at once: OpenAI's (``object``, ``created``, ``owned_by``) and
        Anthropic's (``type``, ``display_name``, ``created_at``, paging fields)."""
        entry = {"id": self.script.model, "object": "model", "created": 0,
                 "owned_by": "agentenv-scripted", "type": "model",
                 "display_name": f"Scripted model ({self.script.name})",
                 "created_at": "1970-01-01T00:00:00Z"}
        return {"object": "list", "data": [entry], "has_more": False,
                "first_id": entry["id"], "last_id": entry["id"]}


async def _aiter(events: Iterable[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event
        await asyncio.sleep(0)  # let the writer flush between events, like a real stream


@attrs.define
class _Answer:
    turn: Turn
    number: int
    model: str
    input_tokens: int
    created: int = attrs.field(factory=lambda: int(time.time()))
    uid: str = attrs.field(factory=lambda: uuid.uuid4().hex[:24])

    @property
    def output_tokens(self) -> int:
        return count_words(self.turn.text) + sum(
            count_words(c.name) + count_words(c.arguments_json) for c in self.turn.tool_calls)

    @property
    def response_id(self) -> str:
        return f"resp_scripted_{self.uid}"

    def call_id(self, index: int, prefix: str = "call") -> str:
        return f"{prefix}_scripted_t{self.number}_{index}"


# -- OpenAI Chat Completions -------------------------------------------------------------------

def _chat_usage(answer: _Answer) -> dict[str, int]:
    return {"prompt_tokens": answer.input_tokens, "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens}


def _chat_finish(answer: _Answer) -> str:
    return "tool_calls" if answer.turn.tool_calls else "stop"


def _chat_body(answer: _Answer, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.turn.text,
                               "refusal": None}
    if answer.turn.tool_calls:
        message["tool_calls"] = [
            {"id": answer.call_id(i), "type": "function",
             "function": {"name": c.name, "arguments": c.arguments_json}}
            for i, c in enumerate(answer.turn.tool_calls)]
    return {"id": f"chatcmpl-scripted-{answer.uid}", "object": "chat.completion",
            "created": answer.created, "model": answer.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": _chat_finish(answer)}],
            "usage": _chat_usage(answer)}


def _chat_stream(answer: _Answer, body: dict[str, Any], include_usage: bool) -> Iterator[bytes]:
    head = {"id": f"chatcmpl-scripted-{answer.uid}", "object": "chat.completion.chunk",
            "created": answer.created, "model": answer.model}
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}], **extra})

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(answer.turn.text) if answer.turn.text else []:
        yield chunk({"content": piece})
    for i, call in enumerate(answer.turn.tool_calls):
        yield chunk({"tool_calls": [{"index": i, "id": answer.call_id(i), "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        for piece in _chunks(call.arguments_json):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, _chat_finish(answer))
    if include_usage:
        yield sse({**head, "choices": [], "usage": _chat_usage(answer)})
    yield sse("[DONE]")


# -- OpenAI Responses --------------------------------------------------------------------------

def _responses_items(answer: _Answer, body: dict[str, Any]) -> list[dict[str, Any]]:
    namespaces = _namespaces(body.get("tools"))
    items: list[dict[str, Any]] = []
    if answer.turn.text is not None:
        items.append({"type": "message", "id": f"msg_scripted_{answer.uid}",
                      "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": answer.turn.text,
                                   "annotations": [], "logprobs": []}]})
    for i, call in enumerate(answer.turn.tool_calls):
        item = {"type": "function_call", "id": f"fc_scripted_{answer.uid}_{i}",
                "call_id": answer.call_id(i), "name": call.name,
                "arguments": call.arguments_json, "status": "completed"}
        if call.name in namespaces:
            item["namespace"], item["name"] = namespaces[call.name]
        items.append(item)
    return items


def _responses_body(answer: _Answer, body: dict[str, Any], *, status: str = "completed",
                    output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    done = status == "completed"
    return {
        "id": answer.response_id, "object": "response", "created_at": answer.created,
        "status": status, "model": answer.model, "error": None, "incomplete_details": None,
        "instructions": body.get("instructions"), "metadata": body.get("metadata") or {},
        "output": _responses_items(answer, body) if output is None else output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
        "text": body.get("text") or {"format": {"type": "text"}},
        "usage": {"input_tokens": answer.input_tokens,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": answer.output_tokens,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": answer.input_tokens + answer.output_tokens} if done else None,
    }


def _responses_stream(answer: _Answer, body: dict[str, Any],
                      include_usage: bool) -> Iterator[bytes]:
    sequence = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal sequence
        payload = {"type": kind, "sequence_number": sequence, **fields}
        sequence += 1
        return sse(payload, kind)

    yield event("response.created",
                response=_responses_body(answer, body, status="in_progress", output=[]))
    yield event("response.in_progress",
                response=_responses_body(answer, body, status="in_progress", output=[]))
    for index, item in enumerate(_responses_items(answer, body)):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
            yield event("response.content_part.added", **ids, part=part)
            for piece in _pieces(text) if text else []:
                yield event("response.output_text.delta", **ids, delta=piece, logprobs=[])
            yield event("response.output_text.done", **ids, text=text, logprobs=[])
            yield event("response.content_part.done", **ids, part={**part, "text": text})
        else:
            yield event("response.output_item.added", output_index=index,
                        item={**item, "arguments": "", "status": "in_progress"})
            for piece in _chunks(item["arguments"]):
                yield event("response.function_call_arguments.delta", item_id=item["id"],
                            output_index=index, delta=piece)
            yield event("response.function_call_arguments.done", item_id=item["id"],
                        output_index=index, name=item["name"], arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=_responses_body(answer, body))


# -- Anthropic Messages ------------------------------------------------------------------------

def _messages_content(answer: _Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.turn.text is not None:
        blocks.append({"type": "text", "text": answer.turn.text})
    for i, call in enumerate(answer.turn.tool_calls):
        blocks.append({"type": "tool_use", "id": answer.call_id(i, "toolu"), "name": call.name,
                       "input": call.arguments_object})
    return blocks


def _messages_stop(answer: _Answer) -> str:
    return "tool_use" if answer.turn.tool_calls else "end_turn"


def _messages_body(answer: _Answer, body: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"msg_scripted_{answer.uid}", "type": "message", "role": "assistant",
            "model": answer.model, "content": _messages_content(answer),
            "stop_reason": _messages_stop(answer), "stop_sequence": None,
            "usage": {"input_tokens": answer.input_tokens,
                      "output_tokens": answer.output_tokens,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def _messages_stream(answer: _Answer, body: dict[str, Any],
                     include_usage: bool) -> Iterator[bytes]:
    start = {**_messages_body(answer, body), "content": [], "stop_reason": None}
    start["usage"] = {**start["usage"], "output_tokens": 0}
    yield sse({"type": "message_start", "message": start}, "message_start")
    yield sse({"type": "ping"}, "ping")
    for index, block in enumerate(_messages_content(answer)):
        if block["type"] == "text":
            yield sse({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}, "content_block_start")
            for piece in _pieces(block["text"]) if block["text"] else []:
                yield sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": piece}},
                          "content_block_delta")
        else:
            yield sse({"type": "content_block_start", "index": index,
                       "content_block": {**block, "input": {}}}, "content_block_start")
            for piece in _chunks(json.dumps(block["input"])):
                yield sse({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}},
                          "content_block_delta")
        yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield sse({"type": "message_delta",
               "delta": {"stop_reason": _messages_stop(answer), "stop_sequence": None},
               "usage": {"output_tokens": answer.output_tokens}}, "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


# -- Gemini generateContent --------------------------------------------------------------------

def _gemini_parts(answer: _Answer) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if answer.turn.text is not None:
        parts.append({"text": answer.turn.text})
    parts.extend({"functionCall": {"name": c.name, "args": c.arguments_object}}
                 for c in answer.turn.tool_calls)
    return parts


def _gemini_usage(answer: _Answer) -> dict[str, int]:
    return {"promptTokenCount": answer.input_tokens,
            "candidatesTokenCount": answer.output_tokens,
            "totalTokenCount": answer.input_tokens + answer.output_tokens}


def _gemini_response(answer: _Answer, parts: list[dict[str, Any]], *,
                     last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    response: dict[str, Any] = {"candidates": [candidate], "modelVersion": answer.model,
                                "responseId": f"scripted-{answer.uid}"}
    if last:  # Gemini ends on STOP whether or not the turn calls functions
        candidate["finishReason"] = "STOP"
        response["usageMetadata"] = _gemini_usage(answer)
    return response


def _gemini_body(answer: _Answer, body: dict[str, Any]) -> dict[str, Any]:
    return _gemini_response(answer, _gemini_parts(answer), last=True)


def _gemini_stream(answer: _Answer, body: dict[str, Any],
                   include_usage: bool) -> Iterator[bytes]:
    """Text one word per event, then the function calls whole in the last event, which also
    carries the finish reason and usage (as Gemini's own streams do)."""
    text = answer.turn.text
    pieces = _pieces(text) if text else []
    calls = [p for p in _gemini_parts(answer) if "functionCall" in p]
    for piece in pieces[:-1] if not calls else pieces:
        yield sse(_gemini_response(answer, [{"text": piece}], last=False))
    tail = calls if calls or not pieces else [{"text": pieces[-1]}]
    if text == "" and not calls:
        tail = [{"text": ""}]
    yield sse(_gemini_response(answer, tail, last=True))

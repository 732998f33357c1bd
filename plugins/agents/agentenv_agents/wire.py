"""The four wire formats, as far as the gateway needs them: error bodies, server-sent events,
and reading a call's usage, model and finish reason out of a response or a finished stream.

Field names follow the public API references: OpenAI Chat Completions (``usage.prompt_tokens``
/ ``completion_tokens``, ``choices[].finish_reason``, stream chunks ending in ``data: [DONE]``,
usage in the last chunk with ``stream_options.include_usage``), OpenAI Responses (``usage
.input_tokens`` / ``output_tokens``, the full response in ``response.completed``), Anthropic
Messages (``usage.input_tokens`` plus cache tokens, ``stop_reason``, usage in ``message_start``
and ``message_delta``), Google's Gemini API ``generateContent`` (``usageMetadata
.promptTokenCount`` / ``candidatesTokenCount`` plus ``thoughtsTokenCount``,
``candidates[].finishReason``, ``modelVersion``; a stream is ``data:`` events each holding a
whole ``GenerateContentResponse`` with the parts produced since the last, errors as
``{"error": {"code", "message", "status"}}``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs

from .records import Api

_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}
_OPENAI_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
#: google.rpc status names by HTTP status, as the Gemini API puts them in ``error.status``.
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 409: "ABORTED", 413: "INVALID_ARGUMENT",
                  429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
                  501: "UNIMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE",
                  504: "DEADLINE_EXCEEDED"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 529: "overloaded_error"}


def error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    """An error in ``api``'s own shape, so the agent's SDK raises its usual error class."""
    if api == "messages":
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if api == "generate_content":
        return {"error": {"code": status, "message": message,
                          "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}}
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None,
                      "code": _OPENAI_CODES.get(status)}}


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event (``event:`` line only where the API uses one)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def iter_sse(raw: bytes) -> Iterator[tuple[str | None, str]]:
    """(event name, data) for every event in a finished stream; comments and blank data skipped."""
    event: str | None = None
    data: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = None, []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            event = line[6:].strip()
    if data:
        yield event, "\n".join(data)


@attrs.define
class Summary:
    """What a record needs from a response: who answered, tokens, why it stopped."""

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: str | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _anthropic_input(usage: dict[str, Any]) -> int | None:
    parts = [_int(usage.get(key)) for key in
             ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    return None if parts[0] is None else sum(p or 0 for p in parts)


def _responses_finish(response: dict[str, Any]) -> str | None:
    status = response.get("status")
    details = response.get("incomplete_details")
    if status == "incomplete" and isinstance(details, dict) and details.get("reason"):
        return f"incomplete:{details['reason']}"
    return status if isinstance(status, str) else None


def _gemini_summary(body: dict[str, Any]) -> Summary:
    usage = body.get("usageMetadata") if isinstance(body.get("usageMetadata"), dict) else None
    model = body.get("modelVersion")
    out = Summary(model=model if isinstance(model, str) else None, usage=usage)
    if usage:
        out.input_tokens = _int(usage.get("promptTokenCount"))
        candidates = _int(usage.get("candidatesTokenCount"))
        thoughts = _int(usage.get("thoughtsTokenCount"))
        if candidates is not None or thoughts is not None:
            out.output_tokens = (candidates or 0) + (thoughts or 0)
    first = (body.get("candidates") or [None])[0]
    if isinstance(first, dict) and isinstance(first.get("finishReason"), str):
        out.finish_reason = first["finishReason"]
    elif isinstance(body.get("promptFeedback"), dict):  # the prompt itself was blocked
        reason = body["promptFeedback"].get("blockReason")
        out.finish_reason = f"blocked:{reason}" if isinstance(reason, str) else None
    return out


def summarize(api: Api, body: Any) -> Summary:
    """Read a non-streamed JSON response (or an assembled stream) for the record."""
    if api == "generate_content" and isinstance(body, list):  # a stream without alt=sse
        body = _merge_gemini([chunk for chunk in body if isinstance(chunk, dict)])
    if not isinstance(body, dict):
        return Summary()
    if api == "generate_content":
        return _gemini_summary(body)
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    model = body.get("model") if isinstance(body.get("model"), str) else None
    out = Summary(model=model, usage=usage)
    if api == "chat_completions":
        if usage:
            out.input_tokens = _int(usage.get("prompt_tokens"))
            out.output_tokens = _int(usage.get("completion_tokens"))
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            out.finish_reason = choices[0].get("finish_reason")
    elif api == "responses":
        if usage:
            out.input_tokens = _int(usage.get("input_tokens"))
            out.output_tokens = _int(usage.get("output_tokens"))
        out.finish_reason = _responses_finish(body)
        if isinstance(body.get("error"), dict):
            out.error = str(body["error"].get("message") or body["error"])
    else:
        if usage:
            out.input_tokens = _anthropic_input(usage)
            out.output_tokens = _int(usage.get("output_tokens"))
        reason = body.get("stop_reason")
        out.finish_reason = reason if isinstance(reason, str) else None
    return out


def error_message(body: Any) -> str | None:
    """The message inside an error body of any of the four APIs (or None)."""
    if isinstance(body, list) and body:  # Gemini answers some errors as a one-item list
        body = body[0]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            msg = err.get("message")
            kind = err.get("type") or err.get("status")
            if isinstance(msg, str):
                return f"{kind}: {msg}" if isinstance(kind, str) else msg
        if isinstance(err, str):
            return err
    return None


def assemble_stream(api: Api, raw: bytes) -> tuple[dict[str, Any], Summary]:
    """The response a finished stream amounts to, and its summary. Runs after the stream has
    been sent, so it costs the agent nothing."""
    if api == "chat_completions":
        response = _assemble_chat(raw)
    elif api == "responses":
        response = _assemble_responses(raw)
    elif api == "generate_content":
        response = _assemble_gemini(raw)
    else:
        response = _assemble_messages(raw)
    summary = summarize(api, response)
    stream_error = response.pop("_stream_error", None)
    if stream_error:
        summary.error = stream_error
    return response, summary


def _loads(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _assemble_chat(raw: bytes) -> dict[str, Any]:
    response: dict[str, Any] = {"object": "chat.completion", "choices": []}
    choices: dict[int, dict[str, Any]] = {}
    for _, data in iter_sse(raw):
        if data.strip() == "[DONE]":
            continue
        chunk = _loads(data)
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk:
            response["_stream_error"] = error_message(chunk) or str(chunk["error"])
            continue
        for key in ("id", "model", "created", "system_fingerprint"):
            if chunk.get(key) is not None:
                response[key] = chunk[key]
        if isinstance(chunk.get("usage"), dict):
            response["usage"] = chunk["usage"]
        for part in chunk.get("choices") or []:
            index = part.get("index", 0)
            choice = choices.setdefault(index, {
                "index": index, "finish_reason": None,
                "message": {"role": "assistant", "content": None}})
            delta = part.get("delta") or {}
            message = choice["message"]
            if delta.get("content"):
                message["content"] = (message["content"] or "") + delta["content"]
            if delta.get("refusal"):
                message["refusal"] = (message.get("refusal") or "") + delta["refusal"]
            for call in delta.get("tool_calls") or []:
                calls = message.setdefault("tool_calls", [])
                at = call.get("index", len(calls))
                while len(calls) <= at:
                    calls.append({"id": None, "type": "function",
                                  "function": {"name": "", "arguments": ""}})
                entry = calls[at]
                if call.get("id"):
                    entry["id"] = call["id"]
                function = call.get("function") or {}
                entry["function"]["name"] += function.get("name") or ""
                entry["function"]["arguments"] += function.get("arguments") or ""
            if part.get("finish_reason"):
                choice["finish_reason"] = part["finish_reason"]
    response["choices"] = [choices[i] for i in sorted(choices)]
    return response


def _assemble_responses(raw: bytes) -> dict[str, Any]:
    final: dict[str, Any] | None = None
    items: dict[int, Any] = {}
    stream_error: str | None = None
    for _, data in iter_sse(raw):
        event = _loads(data)
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind in ("response.created", "response.in_progress", "response.completed",
                    "response.incomplete", "response.failed") and isinstance(
                        event.get("response"), dict):
            final = event["response"]
        elif kind == "response.output_item.done":
            items[event.get("output_index", len(items))] = event.get("item")
        elif kind == "error":
            stream_error = error_message({"error": event}) or str(event)
    response = dict(final or {"object": "response", "status": "in_progress"})
    if not response.get("output") and items:
        response["output"] = [items[i] for i in sorted(items)]
    if stream_error:
        response["_stream_error"] = stream_error
    return response


def _assemble_messages(raw: bytes) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for _, data in iter_sse(raw):
        event = _loads(data)
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            start = event["message"]
            message.update({k: v for k, v in start.items() if k != "content"})
            if isinstance(start.get("usage"), dict):
                message["usage"] = dict(start["usage"])
        elif kind == "content_block_start":
            blocks[event.get("index", len(blocks))] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            index = event.get("index", 0)
            block = blocks.setdefault(index, {})
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                partial[index] = partial.get(index, "") + delta.get("partial_json", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    message[key] = delta[key]
            if isinstance(event.get("usage"), dict):
                usage = message.setdefault("usage", {})
                usage.update({k: v for k, v in event["usage"].items() if v is not None})
        elif kind == "error":
            message["_stream_error"] = error_message(event) or str(event)
    for index, text in partial.items():
        block = blocks.setdefault(index, {})
        parsed = _loads(text) if text else {}
        block["input"] = parsed if parsed is not None else text
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _merge_gemini(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The one response a Gemini stream's chunks amount to: each candidate's parts in order
    (neighbouring text parts of the same kind joined), the last finish reason, usage and model
    version seen."""
    response: dict[str, Any] = {}
    candidates: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if "error" in chunk:
            response["_stream_error"] = error_message(chunk) or str(chunk["error"])
            continue
        for key in ("usageMetadata", "modelVersion", "responseId", "promptFeedback"):
            if chunk.get(key) is not None:
                response[key] = chunk[key]
        for part_of in chunk.get("candidates") or []:
            if not isinstance(part_of, dict):
                continue
            index = part_of.get("index", 0)
            merged = candidates.setdefault(index, {"content": {"role": "model", "parts": []},
                                                   "index": index})
            parts = merged["content"]["parts"]
            for part in (part_of.get("content") or {}).get("parts") or []:
                if not isinstance(part, dict):
                    continue
                last = parts[-1] if parts else None
                if "text" in part and last is not None and "text" in last \
                        and bool(last.get("thought")) == bool(part.get("thought")) \
                        and set(part) <= {"text", "thought", "thoughtSignature"}:
                    last["text"] += part["text"]
                    if part.get("thoughtSignature"):
                        last["thoughtSignature"] = part["thoughtSignature"]
                else:
                    parts.append(dict(part))
            for key in ("finishReason", "safetyRatings", "citationMetadata"):
                if part_of.get(key) is not None:
                    merged[key] = part_of[key]
    response["candidates"] = [candidates[i] for i in sorted(candidates)]
    return response


def _assemble_gemini(raw: bytes) -> dict[str, Any]:
    chunks = [_loads(data) for _, data in iter_sse(raw)]
    return _merge_gemini([chunk for chunk in chunks if isinstance(chunk, dict)])

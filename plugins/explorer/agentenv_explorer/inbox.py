"""The inbox: what runs wait for a person to do, decided from the explorer.

Why here: a ``review`` step waits for a go or no-go, and a ``deploy_human_agent`` waits for a
person to answer its prompt; ``agent-env task review`` and ``task answer`` do it from a shell,
and the explorer's page does it in a browser, through these routes (state changes, so they
pass the explorer's CSRF check like every POST):

* ``GET  /inbox``                       reviews and asks awaiting someone;
* ``POST /reviews/decide``              ``{instance_id, step_id, approve, comment?, by?}``;
* ``GET  /asks/{ask_id}``               the ask (prompt, tools offered) and its tool calls;
* ``POST /asks/{ask_id}/calls``         ``{name, arguments, by?}``: the run makes the call;
* ``POST /asks/{ask_id}/answer``        ``{text, by?}``.

The explorer never holds an env's token: a tool call is a record the run carries out.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agent_env.api import REVIEW_APPROVED, REVIEW_REJECTED, asks, reviews

from .http import api_error, blocking, json_body

#: Who decided, when the page does not say (the explorer has no user accounts).
DEFAULT_BY = "explorer"


async def _body(request: web.Request, keys: set[str]) -> dict[str, Any]:
    body = await json_body(request, keys)
    by = body.get("by", DEFAULT_BY)
    if not isinstance(by, str) or not by.strip():
        raise api_error(400, "field 'by' must be a name")
    return body


#: Where the app keeps the document store these routes read and write.
DOCUMENTS = web.AppKey("inbox_documents", object)


def _documents(request: web.Request) -> Any:
    return request.app[DOCUMENTS]


async def inbox(request: web.Request) -> web.Response:
    documents = _documents(request)
    waiting_reviews = await blocking(reviews(documents).awaiting)
    waiting_asks = await blocking(asks(documents).awaiting)
    return web.json_response({
        "reviews": [r.to_json() for r in waiting_reviews],
        "asks": [{"ask_id": a.ask_id, "instance_id": a.instance_id,
                  "agent_name": a.agent_name, "prompt": a.prompt[:300],
                  "created_at": a.created_at} for a in waiting_asks]})


async def decide_review(request: web.Request) -> web.Response:
    body = await _body(request, {"instance_id", "step_id", "approve", "comment", "by"})
    if not isinstance(body.get("instance_id"), str) or not isinstance(body.get("step_id"), str):
        raise api_error(400, "fields 'instance_id' and 'step_id' name the review")
    if not isinstance(body.get("approve"), bool):
        raise api_error(400, "field 'approve' must be true or false")
    comment = body.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise api_error(400, "field 'comment' must be text")
    try:
        decided = await blocking(reviews(_documents(request)).decide, body["instance_id"],
                                 body["step_id"],
                                 REVIEW_APPROVED if body["approve"] else REVIEW_REJECTED,
                                 body.get("by", DEFAULT_BY), comment or None)
    except ValueError as exc:
        raise api_error(409, str(exc)) from None
    return web.json_response(decided.to_json())


async def get_ask(request: web.Request) -> web.Response:
    store = asks(_documents(request))
    ask_id = request.match_info["ask_id"]
    found = await blocking(store.get, ask_id)
    if found is None:
        raise api_error(404, f"no ask {ask_id!r}")
    calls = await blocking(store.calls, ask_id)
    return web.json_response({**found.to_json(), "calls": [c.to_json() for c in calls]})


async def call_tool(request: web.Request) -> web.Response:
    body = await _body(request, {"name", "arguments", "by"})
    arguments = body.get("arguments", {})
    if not isinstance(body.get("name"), str) or not isinstance(arguments, dict):
        raise api_error(400, "field 'name' names the tool and 'arguments' is a JSON object")
    try:
        call = await blocking(asks(_documents(request)).request_call,
                              request.match_info["ask_id"], body["name"], arguments,
                              body.get("by", DEFAULT_BY))
    except ValueError as exc:
        raise api_error(409, str(exc)) from None
    return web.json_response(call.to_json(), status=202)


async def answer_ask(request: web.Request) -> web.Response:
    body = await _body(request, {"text", "by"})
    if not isinstance(body.get("text"), str) or not body["text"].strip():
        raise api_error(400, "field 'text' is the answer and must not be empty")
    try:
        ended = await blocking(asks(_documents(request)).answer, request.match_info["ask_id"],
                               body["text"], body.get("by", DEFAULT_BY))
    except ValueError as exc:
        raise api_error(409, str(exc)) from None
    return web.json_response(ended.to_json())


def routes(api: str) -> list[web.RouteDef]:
    """The inbox's routes under ``api`` (the app sets :data:`DOCUMENTS`)."""
    return [
        web.get(f"{api}/inbox", inbox),
        web.post(f"{api}/reviews/decide", decide_review),
        web.get(f"{api}/asks/{{ask_id}}", get_ask),
        web.post(f"{api}/asks/{{ask_id}}/calls", call_tool),
        web.post(f"{api}/asks/{{ask_id}}/answer", answer_ask),
    ]

"""JSON-RPC 2.0 replies and batches for the data plane (env servers and the gateway alike).

Why one module: the env server and the gateway answer ``POST /agentenv`` with the same error
shapes, and both accept a batch (a JSON array of requests) the same way: its calls run one after
another in the array's order (so ``[data/reset, data/add, data/get]`` in one round trip sees
each step's effect), requests get their replies in an array in that order, notifications (no
``id``) get none, an empty array is one ``invalid request`` error, and a batch of notifications
only is answered with an empty body (HTTP 200, as the data plane always is). A batch holds at
most ``MAX_BATCH`` calls, so one request cannot queue unbounded work.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .guard import BadBody, loads_body, note_refused
from .mcp_http import json_response

MAX_BATCH = 100


def reply(msg_id: Any, *, result: Any = None, error: Any = None) -> dict[str, Any]:
    """A response object: ``result``, or ``error`` when given."""
    if error is not None:
        return {"jsonrpc": "2.0", "id": msg_id, "error": error}
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def error(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error response object (``data`` only when given)."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return reply(msg_id, error=err)


async def replies(msg: Any, call: Callable[[Any], Awaitable[dict[str, Any]]]) -> Any:
    """The JSON to answer a parsed body with: one call's response, or a batch's (see the
    module); None when nothing is to be sent (a batch of notifications only)."""
    if not isinstance(msg, list):
        return await call(msg)
    if not msg:
        return error(None, -32600, "invalid request")
    if len(msg) > MAX_BATCH:
        return error(None, -32600, "invalid request",
                     {"detail": f"a batch holds at most {MAX_BATCH} calls"})
    answers = []
    for item in msg:
        response = await call(item)
        if isinstance(item, dict) and "id" not in item and "method" in item:
            continue  # a notification: no reply
        answers.append(response)
    return answers or None


async def answer(msg: Any, call: Callable[[Any], Awaitable[dict[str, Any]]]) -> web.Response:
    """The HTTP reply to a parsed body (:func:`replies`, as aiohttp's response)."""
    body = await replies(msg, call)
    return web.Response(status=200) if body is None else json_response(body)


async def route(request: web.Request, call: Callable[[Any], Awaitable[dict[str, Any]]]
                ) -> web.Response:
    """``POST /agentenv``, read and answered: a body that is not usable JSON gets the parse
    error the data plane's error table gives (HTTP 200, id null), anything else
    :func:`answer`."""
    try:
        msg = loads_body(await request.read())
    except BadBody as exc:
        note_refused(request, 200, f"data plane: {exc}")
        return json_response(error(None, -32700, "parse error"))
    return await answer(msg, call)


def envelope(msg: Any) -> tuple[Any, str] | dict[str, Any]:
    """A call's ``(id, method)`` when it is a JSON-RPC 2.0 request object, else the
    ``invalid request`` error to answer it with."""
    if not isinstance(msg, dict):
        return error(None, -32600, "invalid request")
    method, msg_id = msg.get("method"), msg.get("id")
    if msg.get("jsonrpc") != "2.0" or not isinstance(method, str):
        return error(msg_id, -32600, "invalid request")
    return msg_id, method

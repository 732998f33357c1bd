"""What every route of the explorer's API shares: its error body, its body limit, and running
the stores' blocking calls off the event loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

#: The largest request body taken (413 beyond).
MAX_BODY = 1024 * 1024


def api_error(status: int, message: str) -> web.HTTPException:
    """A JSON error response (``{"error": ..., "status": ...}``) to raise from a handler."""
    classes: dict[int, type[web.HTTPException]] = {
        400: web.HTTPBadRequest, 401: web.HTTPUnauthorized, 403: web.HTTPForbidden,
        404: web.HTTPNotFound, 413: web.HTTPRequestEntityTooLarge,
        415: web.HTTPUnsupportedMediaType,
        409: web.HTTPConflict, 421: web.HTTPMisdirectedRequest,
        501: web.HTTPNotImplemented,
    }
    body = json.dumps({"error": message, "status": status})
    cls = classes.get(status, web.HTTPBadRequest)
    if cls is web.HTTPRequestEntityTooLarge:
        return web.HTTPRequestEntityTooLarge(MAX_BODY, 0, text=body,
                                             content_type="application/json")
    return cls(text=body, content_type="application/json")


async def blocking(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(function, *args, **kwargs)


async def json_body(request: web.Request, keys: set[str] | frozenset[str]) -> dict[str, Any]:
    """The request's JSON object body (none: ``{}``); 400 for anything else or a key not in
    ``keys``, naming the accepted ones."""
    try:
        body = await request.json() if request.can_read_body else {}
    except ValueError:
        raise api_error(400, "the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise api_error(400, "the request body must be a JSON object")
    extra = sorted(set(body) - set(keys))
    if extra:
        raise api_error(400, f"unknown field {extra[0]!r} (accepted: {', '.join(sorted(keys))})")
    return body

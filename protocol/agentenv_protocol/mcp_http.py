"""MCP streamable HTTP, server side: one endpoint class shared by env servers and the gateway.

It owns what is the same for both: version negotiation, ``Mcp-Session-Id`` sessions, JSON vs
SSE replies chosen from ``Accept``, ``tools/list`` paging, ``ping``, notifications, the GET
stream and DELETE.
What the tools are and how a call runs is left to a ``ToolHost``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
from aiohttp import web
from multidict import CIMultiDict

from .access import Caller, normalise_role
from .errors import AgentEnvError
from .guard import BadBody, loads_body, note_refused
from .wire import (
    LATEST_VERSION,
    ROLE_HEADER,
    ROLE_META_KEY,
    SESSION_HEADER,
    SESSION_META_KEY,
    SUPPORTED_VERSIONS,
    VERSION_HEADER,
)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SESSION_NOT_FOUND = -32001
#: How often an open GET stream sends an SSE comment, so proxies and clients keep it open.
KEEPALIVE_SECONDS = 15.0
#: Sessions kept at most; past it the oldest is forgotten (its client gets 404 and, as the MCP
#: transport says, initializes again), so initialize floods cannot grow memory without bound.
MAX_SESSIONS = 10_000

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class ToolHost(Protocol):
    """What an MCP endpoint serves: a tool listing and a way to run one call."""

    def mcp_tools(self, caller: Caller) -> Sequence[dict[str, Any]]: ...

    async def mcp_call(
        self, name: str, arguments: dict[str, Any], caller: Caller, call_id: str
    ) -> dict[str, Any]: ...


def negotiate_version(requested: Any) -> str:
    """The client's version when we support it, else our newest."""
    return requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION


def caller_from(params: dict[str, Any], headers: Mapping[str, str]) -> Caller:
    """``_meta`` role (and session) when present; otherwise the (case-insensitive) headers."""
    meta = params.get("_meta")
    if isinstance(meta, dict) and meta.get(ROLE_META_KEY) is not None:
        session = meta.get(SESSION_META_KEY)
        return Caller(normalise_role(meta[ROLE_META_KEY]), session if session else None)
    return Caller(normalise_role(headers.get(ROLE_HEADER)), headers.get(SESSION_HEADER))


@attrs.frozen
class Reply:
    """A whole HTTP reply, free of any server framework: what :meth:`McpEndpoint.answer_post`
    decides, written by aiohttp (:meth:`response`) or by the fast lane (:mod:`.fast_lane`)
    alike."""

    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)

    def response(self) -> web.Response:
        headers = CIMultiDict(self.headers)
        if self.content_type is not None:
            headers["Content-Type"] = self.content_type
        return web.Response(body=self.body or None, status=self.status, headers=headers)


#: Called with (status, why) for a request refused as malformed (one rate-limited log line).
Refused = Callable[[int, str], None]


@attrs.define
class _Session:
    protocol_version: str
    #: Set to end the session's open GET stream (DELETE, shutdown); None when none is open.
    stream_end: asyncio.Event | None = None


class McpEndpoint:
    """Answers POST/GET/DELETE on ``/mcp`` for one ``ToolHost``."""

    def __init__(
        self,
        host: ToolHost,
        *,
        server_name: str,
        server_version: str = "0.1.0",
        instructions: str | None = None,
        prefer_json: bool = False,
        page_size: int = 100,
    ) -> None:
        self.host = host
        self.server_name = server_name
        self.server_version = server_version
        self.instructions = instructions
        self.prefer_json = prefer_json
        self.page_size = max(1, page_size)
        self.sessions: dict[str, _Session] = {}

    # -- replies ----------------------------------------------------------------------------
    def _reply(self, payload: dict[str, Any], sse: bool, headers: dict[str, str] | None = None,
               status: int = 200) -> Reply:
        body = _dumps(payload)
        if sse:
            return Reply(status, f"event: message\ndata: {body}\n\n".encode(),
                         "text/event-stream", {"Cache-Control": "no-cache", **(headers or {})})
        return Reply(status, body.encode(), "application/json", headers or {})

    def _error(self, msg_id: Any, code: int, message: str, status: int = 200,
               sse: bool = False, data: Any = None) -> Reply:
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        return self._reply({"jsonrpc": "2.0", "id": msg_id, "error": err}, sse, status=status)

    # -- handlers ---------------------------------------------------------------------------
    async def handle_get(self, request: web.Request) -> web.StreamResponse:
        """The session's server-to-client SSE stream (the MCP transport's GET): one per
        session, kept open with a comment every ``KEEPALIVE_SECONDS`` until the session is
        deleted, the client leaves or the server stops. Our servers send no requests or
        notifications of their own today (tools do not change), so it carries only those
        comments; clients that open it (the official ``mcp`` client does) get a stream rather
        than a 405."""
        if "text/event-stream" not in request.headers.get("Accept", ""):
            return self._error(None, INVALID_REQUEST,
                               "Not Acceptable: GET /mcp needs Accept: text/event-stream",
                               status=406).response()
        sid = request.headers.get(SESSION_HEADER)
        if not sid:
            return self._error(None, INVALID_REQUEST, "Bad Request: missing Mcp-Session-Id",
                               status=400).response()
        session = self.sessions.get(sid)
        if session is None:
            return self._error(None, SESSION_NOT_FOUND, "Session not found",
                               status=404).response()
        if session.stream_end is not None:
            return self._error(None, INVALID_REQUEST,
                               "Conflict: this session's GET stream is already open",
                               status=409).response()
        end = session.stream_end = asyncio.Event()
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
            SESSION_HEADER: sid})
        try:
            await response.prepare(request)
            while not end.is_set():
                try:
                    await asyncio.wait_for(end.wait(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
        except (ConnectionError, RuntimeError):  # the client went away
            pass
        finally:
            if session.stream_end is end:
                session.stream_end = None
        return response

    async def close_streams(self, app: web.Application | None = None) -> None:
        """End every open GET stream (an ``on_shutdown`` hook: a server stopping must not wait
        out its shutdown timeout on idle streams)."""
        for session in self.sessions.values():
            if session.stream_end is not None:
                session.stream_end.set()

    async def handle_delete(self, request: web.Request) -> web.Response:
        sid = request.headers.get(SESSION_HEADER)
        if not sid:
            return self._error(None, INVALID_REQUEST, "Bad Request: missing Mcp-Session-Id",
                               status=400).response()
        session = self.sessions.pop(sid, None)
        if session is None:
            return self._error(None, SESSION_NOT_FOUND, "Session not found",
                               status=404).response()
        if session.stream_end is not None:
            session.stream_end.set()
        return web.Response(status=200)

    async def handle_post(self, request: web.Request) -> web.Response:
        body = await request.read()

        def refused(status: int, why: str) -> None:
            note_refused(request, status, why)

        return (await self.answer_post(request.headers, body, refused)).response()

    async def answer_post(self, headers: Mapping[str, str], body: bytes,
                          refused: Refused) -> Reply:
        """The reply to one ``POST /mcp`` (``headers`` case-insensitive); aiohttp's route and
        the fast lane (gateway and env servers) both answer through here, so they cannot drift
        apart."""
        accept = headers.get("Accept", "")
        wants_sse = "text/event-stream" in accept
        wants_json = not accept or "application/json" in accept or "*/*" in accept
        if not wants_sse and not wants_json:
            return self._error(None, INVALID_REQUEST,
                               "Not Acceptable: accept application/json or text/event-stream",
                               status=406)
        sse = wants_sse and not (wants_json and self.prefer_json)
        try:
            msg = loads_body(body)
        except BadBody as exc:
            refused(400, str(exc))
            return self._error(None, PARSE_ERROR, "Parse error", status=400,
                               data={"detail": str(exc)})
        if isinstance(msg, list):
            return self._error(None, INVALID_REQUEST, "Invalid Request: batches are not supported",
                               status=400)
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return self._error(None, INVALID_REQUEST, "Invalid Request", status=400)
        method = msg.get("method")
        msg_id = msg.get("id")
        if method is None:
            if "result" in msg or "error" in msg:  # a client's reply to us: nothing to do
                return Reply(202)
            return self._error(msg_id, INVALID_REQUEST, "Invalid Request", status=400)
        if not isinstance(method, str):
            return self._error(msg_id, INVALID_REQUEST, "Invalid Request", status=400)
        is_notification = "id" not in msg
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return self._error(msg_id, INVALID_PARAMS, "Invalid params: params must be an object",
                               sse=sse)

        if method == "initialize":
            if is_notification:
                return self._error(None, INVALID_REQUEST, "Invalid Request: initialize needs an id",
                                   status=400)
            version = negotiate_version(params.get("protocolVersion"))
            new_sid = secrets.token_hex(16)
            while len(self.sessions) >= MAX_SESSIONS:
                evicted = self.sessions.pop(next(iter(self.sessions)))
                if evicted.stream_end is not None:
                    evicted.stream_end.set()
            self.sessions[new_sid] = _Session(version)
            result: dict[str, Any] = {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.server_name, "version": self.server_version},
            }
            if self.instructions:
                result["instructions"] = self.instructions
            return self._reply({"jsonrpc": "2.0", "id": msg_id, "result": result}, sse,
                               headers={SESSION_HEADER: new_sid})

        sid = headers.get(SESSION_HEADER)
        if not sid:
            return self._error(msg_id, INVALID_REQUEST, "Bad Request: missing Mcp-Session-Id",
                               status=400)
        if sid not in self.sessions:
            return self._error(msg_id, SESSION_NOT_FOUND, "Session not found", status=404)
        version_header = headers.get(VERSION_HEADER)
        if version_header is not None and version_header not in SUPPORTED_VERSIONS:
            return self._error(msg_id, INVALID_REQUEST,
                               f"Bad Request: unsupported protocol version {version_header}",
                               status=400)
        if is_notification:
            return Reply(202)

        if method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments")
            if arguments is None:
                arguments = {}
            if not isinstance(name, str) or not isinstance(arguments, dict):
                return self._error(msg_id, INVALID_PARAMS,
                                   "Invalid params: tools/call needs a name and object arguments",
                                   sse=sse)
            result = await self.host.mcp_call(name, arguments, caller_from(params, headers),
                                              str(msg_id))
        elif method == "tools/list":
            tools = self.host.mcp_tools(caller_from(params, headers))
            cursor = params.get("cursor")
            start = 0
            if cursor is not None:
                try:
                    start = int(cursor)
                    if start < 0 or start > len(tools):
                        raise ValueError(cursor)
                except (TypeError, ValueError):
                    return self._error(msg_id, INVALID_PARAMS, "Invalid params: bad cursor",
                                       sse=sse)
            end = start + self.page_size
            result = {"tools": list(tools[start:end])}
            if end < len(tools):
                result["nextCursor"] = str(end)
        elif method == "ping":
            result = {}
        else:
            return self._error(msg_id, METHOD_NOT_FOUND, f"Method not found: {method}", sse=sse)
        return self._reply({"jsonrpc": "2.0", "id": msg_id, "result": result}, sse)


def json_response(data: Any, status: int = 200) -> web.Response:
    """A compact JSON reply (cheaper than ``web.json_response``'s default dumps)."""
    return web.Response(body=_dumps(data).encode(), status=status,
                        content_type="application/json")


def error_response(exc: AgentEnvError) -> web.Response:
    """``exc``'s HTTP status with the wire's ``{"ok": false, "error": {...}}`` body: the one
    shape every HTTP route of an env server or gateway refuses with."""
    return json_response({"ok": False, "error": exc.to_dict()}, status=exc.status)

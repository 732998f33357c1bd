"""The env server: an aiohttp app serving one ``AgentEnvEnvironment``.

Routes: the card, the JSON-RPC data plane (``POST /agentenv``, always HTTP 200), MCP at ``/mcp``,
extension routes, ``/tools/disable|enable`` when the env sets ``tool_access``, ``GET /changes``
when it sets ``changelog`` (:mod:`.changes`), and ``GET /ready``.
Built by an app factory so tests and the gateway can run it in-process; no module state.
Served through :mod:`.guard` (request deadlines, a cap on connections per client, malformed
requests answered 400 with one log line).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from aiohttp import web

from . import changes, jsonrpc
from .access import AccessRuleError, Caller, ToolAccessRules
from .env import (
    AgentEnvEnvironment,
    ExtensionEntry,
    ToolContext,
    ToolEntry,
    agentenv_error_result,
    bound,
    error_result,
    tool_result,
)
from .errors import AgentEnvError
from .fast_lane import FastLane
from .fault_rules import injected, strikes
from .guard import BadBody, Limits, LineLog, guard_app, loads_body, run_guarded
from .mcp_http import McpEndpoint, error_response, json_response
from .parts import PartError, part_to_wire, parts_from_wire
from .schema import CoercionError, coerce, to_jsonable

DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 18765
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

_FAILED_CODES = {"data/reset": "reset_failed", "data/add": "add_failed", "data/get": "get_failed"}


class ArgumentError(ValueError):
    """Tool or extension arguments that do not match the handler's parameters."""


def bind_arguments(params: Sequence[Any], raw: dict[str, Any], accepts_extra: bool,
                   *, reject_unknown: bool) -> dict[str, Any]:
    """Coerce ``raw`` onto declared parameters; missing required ones raise ArgumentError."""
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.name in raw:
            try:
                kwargs[p.name] = coerce(raw[p.name], p.annotation)
            except CoercionError as exc:
                raise ArgumentError(f"invalid value for {p.name}: {exc}") from None
        elif p.required:
            raise ArgumentError(f"missing parameter: {p.name}")
    if len(kwargs) != len(raw):
        known = {p.name for p in params}
        extra = [k for k in raw if k not in known]
        if accepts_extra:
            kwargs.update({k: raw[k] for k in extra})
        elif reject_unknown and extra:
            raise ArgumentError(f"unknown parameter: {extra[0]}")
    return kwargs


def _ext_error(code: str, message: str, status: int, applied: str = "no") -> tuple[int, Any]:
    """An extension refusal as (status, body): the wire's ``{"ok": false, "error": ...}``."""
    exc = AgentEnvError(code, message, applied=applied, status=status)
    return exc.status, {"ok": False, "error": exc.to_dict()}


class EnvServer:
    """Serves one env instance: the ToolHost for MCP plus the plain HTTP routes."""

    def __init__(self, env: AgentEnvEnvironment) -> None:
        self.env = env
        self.registry = env.agentenv_registry()
        self.tools: dict[str, ToolEntry] = self.registry.tools
        self.enforce_access = bool(getattr(env, "tool_access", False))
        self.rules = ToolAccessRules()
        self._listing = [t.mcp_listing() for t in self.tools.values()]
        self._card = json.dumps(env.agentenv_card()).encode()
        self.changelog = env.agentenv_changelog if env.changelog_enabled else None

    # -- MCP ToolHost -----------------------------------------------------------------------
    def mcp_tools(self, caller: Caller) -> Sequence[dict[str, Any]]:
        return self._listing

    async def mcp_call(self, name: str, arguments: dict[str, Any], caller: Caller,
                       call_id: str) -> dict[str, Any]:
        entry = self.tools.get(name)
        if entry is None:
            return error_result(f"Unknown tool: {name}")
        if self.enforce_access and not self.rules.allowed(caller.role, name, hidden=entry.hidden):
            return agentenv_error_result(AgentEnvError(
                "permission_denied",
                f"tool {name!r} is not allowed for role {caller.role or 'default'!r}"))
        try:
            kwargs = bind_arguments(entry.params, arguments, entry.accepts_extra,
                                    reject_unknown=False)
        except ArgumentError as exc:
            return error_result(f"Invalid arguments for tool {name}: {exc}")
        fault = injected(self.env, name)
        if fault is not None:  # set-errors/v1 (.faults): a wait, then maybe a failure
            if fault.delay_seconds:
                await asyncio.sleep(fault.delay_seconds)
            if strikes(self.env, fault):
                return agentenv_error_result(AgentEnvError(
                    fault.error_type, f"tool {name!r} failed (a fault set with set-errors/v1)",
                    retryable=True))
        context = ToolContext(caller.role, caller.session, name, arguments, call_id)
        if entry.context_param:
            kwargs[entry.context_param] = context
        with bound(context):
            if self.changelog is not None:
                return await self._call_logged(entry, name, kwargs, call_id)
            return await self._call(entry, name, kwargs)

    async def _call(self, entry: ToolEntry, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            value = entry.fn(**kwargs)
            if inspect.isawaitable(value):
                value = await value
        except AgentEnvError as exc:
            return agentenv_error_result(exc)
        except Exception as exc:
            return error_result(f"Error executing tool {name}: {exc}")
        return tool_result(value)

    async def _call_logged(self, entry: ToolEntry, name: str, kwargs: dict[str, Any],
                           call_id: str) -> dict[str, Any]:
        """A call in a changelog env: its changes name it, its result carries the log's ids
        around it (:mod:`.changes`)."""
        assert self.changelog is not None
        before = self.changelog.last_id
        token = changes.current_call.set((name, call_id))
        try:
            result = await self._call(entry, name, kwargs)
        finally:
            changes.current_call.reset(token)
        meta = dict(result.get("_meta") or {})
        meta[changes.CHANGELOG_META_KEY] = {"before": before, "after": self.changelog.last_id}
        return {**result, "_meta": meta}

    async def changes_route(self, request: web.Request) -> web.Response:
        """``GET /changes?after_id=&limit=`` (changes/v1)."""
        assert self.changelog is not None
        try:
            after_id, limit = changes.read_query(request.query.get("after_id"),
                                                 request.query.get("limit"))
            page, has_more = self.changelog.page(after_id, limit)
        except AgentEnvError as exc:
            return error_response(exc)
        return json_response({"changes": [c.to_wire() for c in page], "has_more": has_more})

    # -- HTTP routes ------------------------------------------------------------------------
    async def card(self, request: web.Request) -> web.Response:
        return web.Response(body=self._card, content_type="application/json")

    async def ready(self, request: web.Request) -> web.Response:
        return json_response({"ready": True})

    async def dataplane(self, request: web.Request) -> web.Response:
        """JSON-RPC 2.0 on ``POST /agentenv``: always HTTP 200, errors by code; a batch runs
        its calls in order (:mod:`.jsonrpc`)."""
        return await jsonrpc.route(request, self._data_call)

    async def _data_call(self, msg: Any) -> dict[str, Any]:
        """One data-plane call's response object."""
        checked = jsonrpc.envelope(msg)
        if isinstance(checked, dict):
            return checked
        msg_id, method = checked
        handler = self.registry.data.get(method)
        if handler is None:
            return jsonrpc.error(msg_id, -32601, f"method not found: {method}")
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict) and method != "data/reset":
            return jsonrpc.error(msg_id, -32602, "invalid_request",
                              {"detail": "params must be an object"})
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        if method == "data/add":
            try:
                args.append(parts_from_wire(params.get("parts")))
            except PartError as exc:
                return jsonrpc.error(msg_id, -32602, "invalid_request", {"detail": str(exc)})
        elif method == "data/get":
            grant = params.get("write_namespace")
            if grant is not None:
                if not isinstance(grant, dict):
                    return jsonrpc.error(msg_id, -32602, "invalid_request",
                                      {"detail": "write_namespace must be an object"})
                if _accepts(handler, "write_namespace"):
                    kwargs["write_namespace"] = grant
        try:
            value = handler(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            if method == "data/reset" and self.changelog is not None:
                self.changelog.clear()
            if method == "data/get":
                if isinstance(value, dict) and "parts" in value:
                    value = value["parts"]
                result: dict[str, Any] = {"parts": [part_to_wire(p) for p in value or []]}
            else:
                result = {}
        except Exception as exc:
            return jsonrpc.error(msg_id, -32000, str(exc), {"code": _FAILED_CODES[method]})
        return jsonrpc.reply(msg_id, result=result)

    def extension_handler(self, entry: ExtensionEntry) -> Callable[
        [web.Request], Awaitable[web.Response]
    ]:
        """One aiohttp handler per extension route (:meth:`run_extension` does the work)."""

        async def handle(request: web.Request) -> web.Response:
            raw = query_arguments(request.query, request.query.getall)
            body = await request.read() if request.method != "GET" else b""
            status, answer = await self.run_extension(entry, raw, body)
            return json_response(answer, status=status)

        return handle

    async def run_extension(self, entry: ExtensionEntry, raw: dict[str, Any],
                            body: bytes) -> tuple[int, Any]:
        """One extension call, free of any server framework: ``raw`` holds the query
        arguments, ``body`` the request body (a JSON object, merged over them). Returns the
        HTTP status and JSON body, with the wire's error bodies, so an env mounted on another
        framework's app (:mod:`.mounting`) answers exactly as this server does."""
        if body.strip():
            try:
                loaded = loads_body(body)
            except BadBody as exc:
                return _ext_error("invalid_params", f"body is not valid JSON: {exc}", 400)
            if not isinstance(loaded, dict):
                return _ext_error("invalid_params", "body must be a JSON object", 400)
            raw.update(loaded)
        try:
            kwargs = bind_arguments(entry.params, raw, entry.accepts_extra, reject_unknown=True)
        except ArgumentError as exc:
            return _ext_error("invalid_params", str(exc), 400)
        try:
            value = entry.fn(**kwargs)
            if inspect.isawaitable(value):
                value = await value
        except AgentEnvError as exc:
            return exc.status, {"ok": False, "error": exc.to_dict()}
        except Exception as exc:
            return _ext_error("extension_failed", str(exc) or type(exc).__name__, 500,
                              applied="unknown")
        return 200, {} if value is None else to_jsonable(value)

    async def tools_access(self, request: web.Request) -> web.Response:
        allow = request.path.endswith("/enable")
        try:
            body = loads_body(await request.read() or b"{}")
            result = self.rules.apply(body, allow=allow,
                                      tools={n: t.hidden for n, t in self.tools.items()})
        except (ValueError, AccessRuleError) as exc:
            status, answer = _ext_error("invalid_params", str(exc), 400)
            return json_response(answer, status=status)
        return json_response(result)


def query_arguments(keys: Iterable[str], getall: Callable[[str], list[str]]) -> dict[str, Any]:
    """An extension call's query string as arguments: a key given once is a value, a key given
    more often a list (any server framework's query mapping, by its keys and ``getall``)."""
    raw: dict[str, Any] = {}
    for key in keys:
        values = getall(key)
        raw[key] = values[0] if len(values) == 1 else values
    return raw


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


SERVER_KEY = web.AppKey("agentenv_server", EnvServer)
MCP_KEY = web.AppKey("agentenv_mcp", McpEndpoint)


def create_app(
    env: AgentEnvEnvironment,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    prefer_json: bool = False,
    page_size: int = 100,
    limits: Limits | None = None,
    fast_lane: bool = True,
) -> web.Application:
    """Build the aiohttp app for ``env``.

    ``max_body_bytes`` caps request bodies (larger ones get 413); ``prefer_json`` answers
    plain JSON when a client accepts both JSON and SSE (SSE otherwise); ``page_size`` is the
    ``tools/list`` page length; ``limits`` the connection guard's (applied when served by
    :func:`serve`); ``fast_lane``: answer plain ``POST /mcp`` requests in the
    :mod:`.fast_lane` (same replies, less CPU per tool call).
    """
    server = EnvServer(env)
    card = type(env).__agentenv_card__
    mcp = McpEndpoint(server, server_name=server.registry.name,
                      server_version=str(card.get("version", "0.1.0")),
                      instructions=card.get("instructions"),
                      prefer_json=prefer_json, page_size=page_size)
    app = web.Application(client_max_size=max_body_bytes)
    app[SERVER_KEY] = server
    app[MCP_KEY] = mcp
    app.router.add_get("/.well-known/agent-env.json", server.card)
    app.router.add_get("/ready", server.ready)
    app.router.add_post("/agentenv", server.dataplane)
    app.router.add_post("/mcp", mcp.handle_post)
    app.router.add_get("/mcp", mcp.handle_get, allow_head=False)
    app.router.add_delete("/mcp", mcp.handle_delete)
    app.on_shutdown.append(mcp.close_streams)
    for entry in server.registry.extensions:
        app.router.add_route(entry.method, entry.route, server.extension_handler(entry))
    if server.changelog is not None:
        app.router.add_get(changes.CHANGES_PATH, server.changes_route, allow_head=False)
    if server.enforce_access:
        app.router.add_post("/tools/disable", server.tools_access)
        app.router.add_post("/tools/enable", server.tools_access)
    log = LineLog("agentenv_protocol.server")
    lane = FastLane(mcp.answer_post, token=None, log=log, hide=str,
                    max_body=max_body_bytes) if fast_lane else None
    guard_app(app, limits or Limits(), vouch_by_token=False, log=log, lane=lane)
    return app


def serve(env: AgentEnvEnvironment, host: str | None = None, port: int | None = None,
          **options: Any) -> None:
    """Run the env's server until interrupted (``MCP_HOST``/``MCP_PORT`` when not given)."""
    host = host or os.environ.get("MCP_HOST") or DEFAULT_HOST
    port = port or int(os.environ.get("MCP_PORT") or DEFAULT_PORT)
    app = create_app(env, **options)
    print(f"agentenv env {env.environment_name!r} serving on http://{host}:{port}", flush=True)
    run_guarded(app, host, port)

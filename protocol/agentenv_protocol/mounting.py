"""An env mounted on another framework's app: the reference's ``create_fastmcp_app`` family.

Env servers written for the reference build their app with ``create_fastmcp_app(handler,
card=...)``, mount a handler on a FastMCP app of their own (``env.mount(app)``, or
``AgentEnvFastMCPApplication(card, handler).add_routes_to_app(app)``), or add the data plane
to a Starlette app (``AgentEnvStarletteApplication``). Here those names put the routes
:mod:`.server` serves (the card, the ``POST /agentenv`` data plane, extension routes,
``GET /changes``) on that app, answered by the same :class:`~.server.EnvServer` code, so the
wire is the same whichever server runs, and register the handler's ``@tool`` methods as the
app's MCP tools. The app's own MCP endpoint serves them (``/mcp``), with the tools it had.

The ``mcp`` package is needed only for the FastMCP names (this package's ``mcp`` extra): mcp
1.x's ``FastMCP`` (what the reference pins, ``mcp>=1.25,<2``) and mcp 2.x's ``MCPServer``
both work. A tool call's :class:`~.env.ToolContext` comes from the app's own request context
(the role and session in ``_meta``, else the ``AgentEnv-Role`` header), which the app hands a
parameter annotated with its ``Context`` type; :func:`injecting` adds that parameter to a
function's signature in place of the ``ToolContext`` one, so the app never sees the latter.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import typing
import uuid
from collections.abc import Callable
from typing import Any

from . import changes, jsonrpc
from .card import EnvironmentCard
from .env import AgentEnvEnvironment, ToolContext, bound
from .guard import BadBody, loads_body
from .mcp_http import caller_from
from .server import DEFAULT_HOST, DEFAULT_PORT, EnvServer, query_arguments
from .wire import RPC_PATH, WELL_KNOWN_PATH

#: The keyword the app's request context is passed under, in a signature :func:`injecting` made.
CONTEXT_KWARG = "agentenv_mcp_context"
_MCP_MISSING = ("create_fastmcp_app needs the 'mcp' package: "
                "pip install 'agentenv-framework-protocol[mcp]' (or 'mcp>=1.25')")


def mounted_card(handler: AgentEnvEnvironment) -> EnvironmentCard:
    """The card a handler mounts under when none is given: its environment name."""
    return EnvironmentCard(name=handler.environment_name)


class AgentEnvApplication:
    """A handler's routes, ready to add to an app; subclasses know the app's framework."""

    supports_tools = False

    def __init__(self, environment_card: EnvironmentCard, handler: Any) -> None:
        if not isinstance(handler, AgentEnvEnvironment):
            raise TypeError(f"{type(handler).__name__} is not an AgentEnvEnvironment: derive "
                            "the handler's class from agentenv_protocol.AgentEnvEnvironment")
        if handler.__dict__.get("_agentenv_mounted"):
            raise RuntimeError(f"{type(handler).__name__} is already mounted")
        handler.__dict__["_agentenv_mounted_name"] = environment_card.name
        handler.__dict__.pop("_agentenv_registry", None)  # named again, under the card
        self.handler = handler
        self.server = EnvServer(handler)
        self.environment_card = environment_card
        if self.server.tools and not self.supports_tools:
            raise ValueError(f"{type(self).__name__} cannot serve MCP tools, and "
                             f"{type(handler).__name__} has @tool methods "
                             f"({', '.join(sorted(self.server.tools))}): mount it on a "
                             "FastMCP app (create_fastmcp_app)")

    def add_routes_to_app(self, app: Any, *, rpc_url: str = RPC_PATH,
                          card_url: str = WELL_KNOWN_PATH) -> None:
        """Add the card, data plane and extension routes (and tools, where served) to ``app``."""
        from starlette.requests import Request
        from starlette.responses import Response

        server = self.server

        def reply(body: Any, status: int = 200) -> Response:
            if body is None:
                return Response(status_code=status)
            return Response(json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                            status_code=status,
                            media_type="application/json")

        async def card(request: Request) -> Response:
            return Response(server._card, media_type="application/json")

        async def dataplane(request: Request) -> Response:
            try:
                msg = loads_body(await request.body())
            except BadBody:
                return reply(jsonrpc.error(None, -32700, "parse error"))
            return reply(await jsonrpc.replies(msg, server._data_call))

        def extension(entry: Any) -> Callable[[Request], Any]:
            async def handle(request: Request) -> Response:
                query = request.query_params
                raw = query_arguments(query.keys(), query.getlist)
                body = await request.body() if request.method != "GET" else b""
                status, answer = await server.run_extension(entry, raw, body)
                return reply(answer, status)

            return handle

        async def changes_route(request: Request) -> Response:
            assert server.changelog is not None
            try:
                after_id, limit = changes.read_query(request.query_params.get("after_id"),
                                                     request.query_params.get("limit"))
                page, has_more = server.changelog.page(after_id, limit)
            except Exception as exc:  # AgentEnvError: the wire's error body
                from .errors import AgentEnvError

                if not isinstance(exc, AgentEnvError):
                    raise
                return reply({"ok": False, "error": exc.to_dict()}, exc.status)
            return reply({"changes": [c.to_wire() for c in page], "has_more": has_more})

        self._check(app)
        self._add_route(app, card_url, ["GET"], card)
        self._add_route(app, rpc_url, ["POST"], dataplane)
        for entry in server.registry.extensions:
            self._add_route(app, entry.route, [entry.method], extension(entry))
        if server.changelog is not None:
            self._add_route(app, changes.CHANGES_PATH, ["GET"], changes_route)
        self._add_tools(app)
        self.handler.__dict__["_agentenv_mounted"] = True

    def _check(self, app: Any) -> None:
        """Refuse what the app cannot honour before anything is added to it."""

    def _add_route(self, app: Any, path: str, methods: list[str],
                   handler: Callable[..., Any]) -> None:
        raise NotImplementedError

    def _add_tools(self, app: Any) -> None:
        return None


class AgentEnvStarletteApplication(AgentEnvApplication):
    """The data plane, card and extensions on a Starlette app (no MCP tools)."""

    def _add_route(self, app: Any, path: str, methods: list[str],
                   handler: Callable[..., Any]) -> None:
        from starlette.routing import Route

        app.router.routes.append(Route(path, handler, methods=methods))


class AgentEnvFastMCPApplication(AgentEnvApplication):
    """Everything, tools included, on an mcp ``FastMCP`` (1.x) or ``MCPServer`` (2.x) app."""

    supports_tools = True

    def _check(self, app: Any) -> None:
        if not callable(getattr(app, "tool", None)) or \
                not callable(getattr(app, "custom_route", None)):
            raise TypeError(f"{type(app).__name__} is not a FastMCP app (it needs tool() and "
                            "custom_route()); mount a Starlette app with "
                            "AgentEnvStarletteApplication")
        if self.handler.tool_access:
            raise ValueError(f"{type(self.handler).__name__} sets tool_access, which a FastMCP "
                             "app cannot enforce here: serve it with serve() and no self.mcp, "
                             "or put the env behind agent-env's gateway, which enforces it")
        if self.server.tools and _context_type() is None:
            raise ImportError(_MCP_MISSING)

    def _add_route(self, app: Any, path: str, methods: list[str],
                   handler: Callable[..., Any]) -> None:
        app.custom_route(path, methods=methods)(handler)

    def _add_tools(self, app: Any) -> None:
        accepted = inspect.signature(app.tool).parameters
        logged = self.server.changelog is not None
        for entry in self.server.tools.values():
            extra: dict[str, Any] = {}
            meta = entry.mcp_listing().get("_meta")
            if meta and "meta" in accepted:
                extra["meta"] = meta
            fn = _logged(entry.fn, entry.name) if logged else entry.fn
            app.tool(name=entry.name, description=entry.description, **extra)(
                _inject(fn, entry.name))


def create_fastmcp_app(handler: Any, *, card: EnvironmentCard, **fastmcp_kwargs: Any) -> Any:
    """A FastMCP app serving ``handler`` under ``card``, not yet running: ``app.run(transport=
    "streamable-http")`` listens on ``MCP_HOST``:``MCP_PORT`` (``0.0.0.0:18765``)."""
    host = os.environ.get("MCP_HOST") or DEFAULT_HOST
    port = int(os.environ.get("MCP_PORT") or DEFAULT_PORT)
    try:
        # mcp 1.x (imported by name: this venv's type checker sees 2.x, where it is gone)
        app = importlib.import_module("mcp.server.fastmcp").FastMCP(card.name, **fastmcp_kwargs)
        app.settings.host, app.settings.port = host, port
        # the gateway reaches the env by its container name, not localhost
        app.settings.transport_security.enable_dns_rebinding_protection = False
    except ModuleNotFoundError:
        app = _mcp2_app(card.name, host, port, fastmcp_kwargs)
    AgentEnvFastMCPApplication(card, handler).add_routes_to_app(app)
    return app


def _mcp2_app(name: str, host: str, port: int, kwargs: dict[str, Any]) -> Any:
    """mcp 2.x's ``MCPServer``, whose ``run`` takes the address as arguments: defaulted here
    to the env's, as 1.x's settings are."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ModuleNotFoundError as exc:
        raise ImportError(_MCP_MISSING) from exc

    class EnvMCPServer(MCPServer):
        def run(self, transport: Any = "streamable-http", **options: Any) -> None:
            if transport != "stdio":
                options.setdefault("host", host)
                options.setdefault("port", port)
            super().run(transport, **options)

    return EnvMCPServer(name, **kwargs)


def _context_type() -> type | None:
    """The installed mcp's request ``Context`` class (1.x, else 2.x), None without mcp."""
    for module in ("mcp.server.fastmcp", "mcp.server.mcpserver"):
        try:
            return importlib.import_module(module).Context
        except ModuleNotFoundError:
            continue
    return None


def _logged(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` with its changelog entries naming the call, as :mod:`.server` names them."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        token = changes.current_call.set((name, ToolContext.current().call_id or ""))
        try:
            value = fn(*args, **kwargs)
            return await value if inspect.isawaitable(value) else value
        finally:
            changes.current_call.reset(token)

    return call


def _context_slot(fn: Callable[..., Any]) -> str | None:
    """The parameter annotated ``ToolContext`` (or ``ToolContext | None``), if any."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    for name, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(name, param.annotation)
        if annotation is ToolContext or ToolContext in typing.get_args(annotation) or \
                annotation in ("ToolContext", "ToolContext | None"):
            return name
    return None


def _context_from(mcp_context: Any, tool: str, arguments: dict[str, Any]) -> ToolContext:
    """A call's ToolContext from the app's request context: tolerant of every missing link
    (no live request, no ``_meta``, stdio with no HTTP request)."""
    try:
        request_context = mcp_context.request_context if mcp_context is not None else None
    except (ValueError, AttributeError, LookupError):
        request_context = None
    meta = getattr(request_context, "meta", None)
    if meta is not None and not isinstance(meta, dict):
        meta = {**(getattr(meta, "model_extra", None) or {})}
    request = getattr(request_context, "request", None)
    headers = getattr(request, "headers", None) or {}
    caller = caller_from({"_meta": meta} if meta else {}, headers)
    return ToolContext(caller.role, caller.session, tool, arguments, uuid.uuid4().hex)


def injecting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as an MCP app should register it: unchanged when it takes no ``ToolContext``
    and no app context is needed; otherwise a twin (same name, doc, sync or async) whose
    signature drops the ``ToolContext`` parameter and takes the app's request context
    instead (the app fills it and leaves it out of the tool's schema). Each call runs under
    its ToolContext, so ``ToolContext.current()`` works in it too. For a function registered
    on the app directly: ``app.tool()(injecting(fn))``."""
    return _inject(fn, getattr(fn, "__name__", "tool"))


def _inject(fn: Callable[..., Any], tool: str) -> Callable[..., Any]:
    slot = _context_slot(fn)
    context_type = _context_type()
    if context_type is None:
        if slot is not None:
            raise ImportError(_MCP_MISSING)
        return fn
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"{getattr(fn, '__qualname__', fn)!r}: cannot resolve its annotations "
                        f"({exc}); an MCP app needs them resolvable") from None
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in signature.parameters.values() if p.name != slot]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn  # takes anything: nothing to add the context parameter to
    params.append(inspect.Parameter(CONTEXT_KWARG, inspect.Parameter.KEYWORD_ONLY,
                                    annotation=context_type, default=None))
    returns = hints.get("return", signature.return_annotation)
    twin_signature = signature.replace(parameters=params, return_annotation=returns)
    annotations = {p.name: p.annotation for p in params
                   if p.annotation is not inspect.Parameter.empty}
    if returns is not inspect.Signature.empty:
        annotations["return"] = returns
    def prepare(args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> tuple[ToolContext, dict[str, Any]]:
        mcp_context = kwargs.pop(CONTEXT_KWARG, None)
        call = twin_signature.bind_partial(*args, **kwargs)
        arguments = dict(call.arguments)
        context = _context_from(mcp_context, tool, arguments)
        if slot is not None:
            arguments[slot] = context
        return context, arguments

    async def async_twin(*args: Any, **kwargs: Any) -> Any:
        context, arguments = prepare(args, kwargs)
        with bound(context):
            return await fn(**arguments)

    def sync_twin(*args: Any, **kwargs: Any) -> Any:
        context, arguments = prepare(args, kwargs)
        with bound(context):
            return fn(**arguments)

    # the same kind as fn, so the app runs a sync tool as it would have run fn
    twin: Any = async_twin if inspect.iscoroutinefunction(fn) else sync_twin
    functools.update_wrapper(twin, fn)
    del twin.__wrapped__  # the app must read the twin's signature, not fn's
    twin.__signature__ = twin_signature
    twin.__annotations__ = annotations
    return twin

"""The env-author SDK: the reference's public names, as env files written for it use them.

An env is a class deriving from ``AgentEnvEnvironment``, decorated ``@environment_card(...)``,
with methods marked ``@tool``, ``@reset_data``, ``@add_data``, ``@get_data`` and
``@extension``. Nothing here imports aiohttp: the HTTP side is loaded by ``serve()`` /
``create_app()`` only, so importing an env stays cheap.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import os
import re
import typing
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import attrs

from .access import Caller, normalise_role
from .changes import Changelog
from .errors import AgentEnvError
from .schema import ParamSpec, input_schema, read_params, to_jsonable

# the role and session keys stay importable from here, where env code and tests found them
from .wire import HIDDEN_META_KEY
from .wire import ROLE_META_KEY as ROLE_META_KEY
from .wire import SESSION_META_KEY as SESSION_META_KEY

F = TypeVar("F", bound=Callable[..., Any])

_CARD_KEYS = frozenset({"name", "description", "version", "tool_access", "instructions",
                        "changelog"})
_DATA_KINDS = {"reset": "data/reset", "add": "data/add", "get": "data/get"}


@attrs.define(frozen=True)
class ToolContext:
    """Injected into a tool parameter annotated ``ToolContext``: who called, with what.

    Also readable as ``ToolContext.current()`` from any code a tool call runs (the
    reference's spelling), which is how a tool registered outside ``@tool`` gets it."""

    role: str | None = None
    session: str | None = None
    tool: str = ""
    arguments: dict[str, Any] = attrs.field(factory=dict, hash=False)
    call_id: str | None = None

    @property
    def session_id(self) -> str | None:
        return self.session

    @property
    def caller(self) -> Caller:
        return Caller(self.role, self.session)

    @staticmethod
    def current() -> ToolContext:
        """The context of the tool call this code runs for; an empty one outside any call."""
        return _current_call.get()

    @classmethod
    def as_caller(cls, role: str | None = None, session: str | None = None, *, tool: str = "",
                  arguments: Mapping[str, Any] | None = None) -> ToolContext:
        """A context for code acting as ``role`` outside any call (a test, a seeding
        script), to bind with :func:`bound`."""
        return cls(normalise_role(role), session, tool, dict(arguments or {}),
                   uuid.uuid4().hex)


EMPTY_CONTEXT = ToolContext()
_current_call: contextvars.ContextVar[ToolContext] = contextvars.ContextVar(
    "agentenv_protocol.tool_context", default=EMPTY_CONTEXT)


@contextlib.contextmanager
def bound(context: ToolContext) -> Iterator[ToolContext]:
    """Make ``context`` what ``ToolContext.current()`` returns for the block."""
    token = _current_call.set(context)
    try:
        yield context
    finally:
        _current_call.reset(token)


@attrs.define(frozen=True)
class _ToolMark:
    name: str | None
    description: str | None
    hidden_by_default: bool
    annotations: dict[str, Any] | None
    meta: dict[str, Any] | None


@attrs.define(frozen=True)
class _ExtensionMark:
    uri: str
    op: str | None
    method: str
    path: str | None
    description: str | None
    required: bool


@typing.overload
def tool(fn: F, *, name: str | None = None, description: str | None = None,
         hidden_by_default: bool = False, annotations: Mapping[str, Any] | None = None,
         meta: Mapping[str, Any] | None = None) -> F: ...


@typing.overload
def tool(fn: None = None, *, name: str | None = None, description: str | None = None,
         hidden_by_default: bool = False, annotations: Mapping[str, Any] | None = None,
         meta: Mapping[str, Any] | None = None) -> Callable[[F], F]: ...


def tool(
    fn: F | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    hidden_by_default: bool = False,
    annotations: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Any:
    """Mark a method as an MCP tool (``@tool(name=...)``; bare ``@tool`` is accepted too).

    ``name`` may contain ``{environment_name}``; the description defaults to the docstring.
    """
    mark = _ToolMark(
        name, description, hidden_by_default,
        dict(annotations) if annotations else None, dict(meta) if meta else None,
    )

    def wrap(f: F) -> F:
        f.__agentenv_tool__ = mark  # type: ignore[attr-defined]
        return f

    return wrap(fn) if fn is not None else wrap


def _data_marker(kind: str) -> Callable[..., Any]:
    def marker(fn: F | None = None) -> Any:
        def wrap(f: F) -> F:
            f.__agentenv_data__ = kind  # type: ignore[attr-defined]
            return f

        return wrap(fn) if fn is not None else wrap

    marker.__name__ = f"{kind}_data"
    marker.__doc__ = f"Mark the method that handles ``data/{kind}``."
    return marker


reset_data = _data_marker("reset")
add_data = _data_marker("add")
get_data = _data_marker("get")


def extension(
    uri: str,
    *,
    op: str | None = None,
    method: str = "POST",
    path: str | None = None,
    description: str | None = None,
    required: bool = False,
) -> Callable[[F], F]:
    """Mark a method as a REST extension advertised under ``uri`` on the card.

    Without ``op`` it is served at ``/agentenv/ext/<method name>``; with ``op`` at
    ``/agentenv/ext/<slug>/<op>`` (slug = ``uri`` minus ``urn:agentenv:`` and ``/vN``);
    ``path`` overrides the route.
    """
    verb = method.upper()
    if verb not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        raise ValueError(f"unsupported extension method {method!r}")

    def wrap(f: F) -> F:
        f.__agentenv_extension__ = _ExtensionMark(  # type: ignore[attr-defined]
            uri, op, verb, path, description, required
        )
        return f

    return wrap


def environment_card(cls: type | None = None, **fields: Any) -> Any:
    """Class decorator giving the card's fields (``name``, ``description``, ``version``,
    ``tool_access``, ``instructions``, ``changelog``: serve changes/v1, see :mod:`.changes`);
    an unknown key raises at class definition."""
    unknown = set(fields) - _CARD_KEYS
    if unknown:
        raise TypeError(f"environment_card: unknown field(s) {sorted(unknown)}")

    def wrap(c: type) -> type:
        merged = {**getattr(c, "__agentenv_card__", {}), **fields}
        c.__agentenv_card__ = merged  # type: ignore[attr-defined]
        if "tool_access" in fields:
            c.tool_access = bool(fields["tool_access"])  # type: ignore[attr-defined]
        _check_unique_tools(c)
        return c

    return wrap(cls) if cls is not None else wrap


def extension_slug(uri: str) -> str:
    """``urn:agentenv:clock/v1`` -> ``clock``."""
    slug = uri.removeprefix("urn:agentenv:")
    return re.sub(r"/v\d+$", "", slug)


@attrs.define
class ToolEntry:
    """A registered tool, bound to its env instance."""

    name: str
    description: str
    schema: dict[str, Any]
    fn: Callable[..., Any]
    params: list[ParamSpec]
    context_param: str | None
    hidden: bool
    annotations: dict[str, Any] | None
    meta: dict[str, Any] | None
    is_async: bool
    accepts_extra: bool

    def mcp_listing(self) -> dict[str, Any]:
        """The ``tools/list`` entry (``_meta`` marks hidden-by-default tools)."""
        entry: dict[str, Any] = {
            "name": self.name, "description": self.description, "inputSchema": self.schema
        }
        if self.annotations:
            entry["annotations"] = self.annotations
        meta = dict(self.meta or {})
        if self.hidden:
            meta[HIDDEN_META_KEY] = True
        if meta:
            entry["_meta"] = meta
        return entry


@attrs.define
class ExtensionEntry:
    """A registered extension route, bound to its env instance."""

    uri: str
    name: str
    route: str
    method: str
    fn: Callable[..., Any]
    params: list[ParamSpec]
    accepts_extra: bool
    is_async: bool
    description: str | None
    required: bool
    op: str | None


@attrs.define
class Registry:
    """Everything an env serves, resolved once per instance."""

    name: str
    tools: dict[str, ToolEntry]
    data: dict[str, Callable[..., Any]]
    extensions: list[ExtensionEntry]


def _marked_members(cls: type, attr: str) -> list[tuple[str, Any, Any]]:
    """(attribute name, function, mark) for marked functions along the MRO, subclass first."""
    seen: set[str] = set()
    out = []
    for klass in cls.__mro__:
        for key, value in vars(klass).items():
            if key in seen:
                continue
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            mark = getattr(fn, attr, None)
            if mark is not None:
                seen.add(key)
                out.append((key, fn, mark))
    return out


def _check_unique_tools(cls: type) -> None:
    names: dict[str, str] = {}
    for key, _fn, mark in _marked_members(cls, "__agentenv_tool__"):
        name = mark.name or key
        if name in names:
            raise ValueError(f"duplicate tool name {name!r} ({names[name]} and {key})")
        names[name] = key


class AgentEnvEnvironment:
    """Base class of an environment served over the agentenv protocol."""

    tool_access: bool = False
    __agentenv_card__: dict[str, Any] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_unique_tools(cls)

    # -- naming -----------------------------------------------------------------------------
    @property
    def environment_name(self) -> str:
        """The card a mount was given (:mod:`.mounting`), else ``ENVIRONMENT_NAME``, else the
        class card's ``name``, else the class name."""
        return (
            self.__dict__.get("_agentenv_mounted_name")
            or os.environ.get("ENVIRONMENT_NAME")
            or type(self).__agentenv_card__.get("name")
            or type(self).__name__
        )

    # -- changes/v1 -------------------------------------------------------------------------
    @property
    def changelog_enabled(self) -> bool:
        return bool(type(self).__agentenv_card__.get("changelog"))

    @property
    def agentenv_changelog(self) -> Changelog:
        """This env's changelog (:mod:`.changes`); made on first use."""
        log = self.__dict__.get("_agentenv_changelog")
        if log is None:
            log = self.__dict__["_agentenv_changelog"] = Changelog()
        return log

    def record_change(self, kind: str, **data: Any) -> None:
        """Note a change of this env's state (``kind`` names it, ``data`` says what), for
        changes/v1 readers and the gateway's trajectory. Needs
        ``@environment_card(changelog=True)``: without it nobody could read the change."""
        if not self.changelog_enabled:
            raise RuntimeError(f"{type(self).__name__}.record_change needs "
                               "@environment_card(changelog=True) on the class")
        self.agentenv_changelog.record(kind, data)

    # -- registry ---------------------------------------------------------------------------
    def agentenv_registry(self) -> Registry:
        """Resolve tools, data handlers and extensions of this instance (cached)."""
        cached = self.__dict__.get("_agentenv_registry")
        if cached is not None:
            return cached
        env_name = self.environment_name
        tools: dict[str, ToolEntry] = {}
        for key, fn, mark in _marked_members(type(self), "__agentenv_tool__"):
            name = (mark.name or key).replace("{environment_name}", env_name)
            if name in tools:
                raise ValueError(f"duplicate tool name {name!r}")
            params, ctx_param, extra = read_params(fn, skip=(ToolContext,))
            bound = getattr(self, key)
            tools[name] = ToolEntry(
                name=name,
                description=mark.description or inspect.cleandoc(fn.__doc__ or ""),
                schema=input_schema(params),
                fn=bound,
                params=params,
                context_param=ctx_param,
                hidden=mark.hidden_by_default,
                annotations=mark.annotations,
                meta=mark.meta,
                is_async=inspect.iscoroutinefunction(fn),
                accepts_extra=extra,
            )
        data: dict[str, Callable[..., Any]] = {}
        for key, _fn, kind in _marked_members(type(self), "__agentenv_data__"):
            op = _DATA_KINDS[kind]
            if op in data:
                raise ValueError(f"two handlers for {op}")
            data[op] = getattr(self, key)
        extensions: list[ExtensionEntry] = []
        routes: set[tuple[str, str]] = set()
        for key, fn, mark in _marked_members(type(self), "__agentenv_extension__"):
            if mark.path:
                route = mark.path if mark.path.startswith("/") else "/" + mark.path
            elif mark.op:
                route = f"/agentenv/ext/{extension_slug(mark.uri)}/{mark.op}"
            else:
                route = f"/agentenv/ext/{key}"
            if (mark.method, route) in routes:
                raise ValueError(f"two extensions on {mark.method} {route}")
            routes.add((mark.method, route))
            params, _ctx, extra = read_params(fn)
            extensions.append(ExtensionEntry(
                uri=mark.uri, name=key, route=route, method=mark.method,
                fn=getattr(self, key), params=params, accepts_extra=extra,
                is_async=inspect.iscoroutinefunction(fn),
                description=mark.description or (
                    inspect.cleandoc(fn.__doc__) if fn.__doc__ else None),
                required=mark.required, op=mark.op,
            ))
        reg = Registry(env_name, tools, data, extensions)
        self.__dict__["_agentenv_registry"] = reg
        return reg

    # -- card -------------------------------------------------------------------------------
    def agentenv_card(self) -> dict[str, Any]:
        """The card as wire JSON (null fields present)."""
        from .card import (
            DATA_OPERATIONS,
            Capabilities,
            EnvironmentCard,
            ExtensionInfo,
            ToolInfo,
        )
        from .changes import card_entry as changes_card_entry

        reg = self.agentenv_registry()
        tools = [ToolInfo(t.name, t.description, t.schema) for t in reg.tools.values()]
        by_uri: dict[str, dict[str, Any]] = {}
        for ext in reg.extensions:
            info = by_uri.setdefault(ext.uri, {
                "description": ext.description, "required": ext.required,
                "endpoint": ext.route.rsplit("/", 1)[0] if ext.op else ext.route,
                "methods": {},
            })
            info["required"] = info["required"] or ext.required
            info["methods"][ext.name] = {
                "method": ext.method, "endpoint": ext.route, "request": input_schema(ext.params),
            }
        extensions = [
            ExtensionInfo(uri, info["description"],
                          {"endpoint": info["endpoint"], "methods": info["methods"]},
                          info["required"])
            for uri, info in by_uri.items()
        ]
        if self.changelog_enabled:
            entry = changes_card_entry()
            extensions.append(ExtensionInfo(entry["uri"], entry["description"],
                                            entry["params"], entry["required"]))
        card = EnvironmentCard(
            name=reg.name,
            capabilities=Capabilities(
                extensions=extensions or None,
                tools=tools or None,
                operations=[op for op in DATA_OPERATIONS if op in reg.data],
            ),
        )
        return card.to_wire()

    # -- serving ----------------------------------------------------------------------------
    #: A FastMCP app of the env's own (the reference's pattern: set ``self.mcp`` in
    #: ``__init__``, register extra tools on it); ``serve()`` then mounts on it and runs it.
    mcp: Any = None

    def create_app(self, **options: Any) -> Any:
        """An aiohttp ``web.Application`` serving this env (see ``server.create_app``)."""
        from .server import create_app

        return create_app(self, **options)

    def mount(self, app: Any) -> Any:
        """Serve this env's card, data plane, extensions and ``@tool`` methods from a FastMCP
        app (:mod:`.mounting`); it becomes ``self.mcp``. Once per instance."""
        from .mounting import AgentEnvFastMCPApplication, mounted_card

        if self.__dict__.get("_agentenv_mounted"):
            raise RuntimeError(f"{type(self).__name__} is already mounted")
        AgentEnvFastMCPApplication(mounted_card(self), self).add_routes_to_app(app)
        self.mcp = app
        return app

    def serve(self, host: str | None = None, port: int | None = None, *,
              transport: str = "streamable-http", **options: Any) -> None:
        """Serve forever on ``MCP_HOST``:``MCP_PORT`` (default ``0.0.0.0:18765``); with
        ``self.mcp`` set, mount on that app and run it instead (``transport`` is its)."""
        if host in ("streamable-http", "sse", "stdio"):  # the reference's serve(transport)
            transport, host = host, None
        if self.mcp is not None:
            if not self.__dict__.get("_agentenv_mounted"):
                self.mount(self.mcp)
            address: dict[str, Any] = {}
            if getattr(self.mcp, "settings", None) is None or \
                    not hasattr(self.mcp.settings, "host"):
                # mcp 2.x's MCPServer takes its address at run(); 1.x's FastMCP keeps the
                # one its maker set in its settings, which are left alone
                from .server import DEFAULT_HOST, DEFAULT_PORT

                if transport != "stdio":
                    address = {"host": host or os.environ.get("MCP_HOST") or DEFAULT_HOST,
                               "port": port or int(os.environ.get("MCP_PORT") or DEFAULT_PORT)}
            self.mcp.run(transport=transport, **address)
            return
        if transport != "streamable-http":
            raise ValueError(f"transport {transport!r}: this server speaks streamable-http; "
                             "set self.mcp to a FastMCP app to serve another transport")
        from .server import serve

        serve(self, host=host, port=port, **options)


def tool_result(value: Any) -> dict[str, Any]:
    """An MCP ``tools/call`` result for a tool's return value."""
    if isinstance(value, dict) and "content" in value and isinstance(value.get("content"), list) \
            and ("isError" in value or "structuredContent" in value):
        return value  # already an MCP result
    if value is None:
        return {"content": [], "isError": False}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    data = to_jsonable(value)
    text = json.dumps(data, ensure_ascii=False)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if isinstance(data, dict):
        result["structuredContent"] = data
    return result


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def agentenv_error_result(exc: AgentEnvError) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": f"{exc.code}: {exc.message}"}],
        "structuredContent": exc.to_dict(),
        "isError": True,
    }

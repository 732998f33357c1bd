"""Verify scripts written for the official ``mcp`` 1.x client run unchanged on ``mcp`` 2.x.

The reference's scripts (``artifacts/check_echo/verify.py`` of its echo-mcp bundle, for one) are
written against mcp 1.x, which is what their env images install (``mcp>=1.25,<2``)::

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    async with streamable_http_client(mcp_url) as (read, write, _):
        ...
    not result.isError

What changed in 2.x (read from the installed mcp 2.3.0 against 1.x):

* ``streamable_http_client(url, *, http_client=None, terminate_on_close=True)`` yields
  ``(read, write)``; in 1.24+ it yields ``(read, write, get_session_id)``, so the 3-name unpacking
  above fails with ``ValueError: not enough values to unpack``;
* ``streamablehttp_client(url, headers=None, timeout=30, sse_read_timeout=300, ...)``, 1.x's
  older (deprecated) name, no longer exists;
* results are ``mcp_types`` pydantic models whose attributes are snake_case (``is_error``,
  ``structured_content``, ``input_schema``, ``protocol_version``); the camelCase names are only
  wire aliases, so ``result.isError`` raises ``AttributeError``.

Pinning ``mcp<2`` instead would break this repository's protocol tests, which use the 2.x names
(``as (read, write)``, ``.is_error``, ``.input_schema``, ``.protocol_version``). So mcp_env,
before it loads a script and only when mcp 2.x is installed:

* reads every camelCase field name of an ``mcp_types`` model as its snake_case field (a fallback
  consulted only where an attribute would otherwise be missing, so 2.x code is unaffected);
* gives the script, and only the script (its own ``__import__``), a 1.x view of
  ``mcp.client.streamable_http``: both names, yielding ``(read, write, get_session_id)``. A
  script that unpacks two names from that call (2.x style) gets the real module instead.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import types
from collections.abc import AsyncIterator, Callable
from typing import Any

STREAMS_MODULE = "mcp.client.streamable_http"
STREAM_FUNCTIONS = ("streamable_http_client", "streamablehttp_client")
SESSION_HEADER = "mcp-session-id"
_installed = False


def mcp_major() -> int | None:
    """The installed mcp's major version, or None when it is not installed."""
    from importlib import metadata

    try:
        return int(metadata.version("mcp").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return None


def needs_compat() -> bool:
    major = mcp_major()
    return major is not None and major >= 2


# -- camelCase attributes ---------------------------------------------------------------------


def _alias_map(cls: type) -> dict[str, str]:
    cached = cls.__dict__.get("_agentenv_aliases")
    if cached is None:
        cached = {}
        for name, field in getattr(cls, "model_fields", {}).items():
            for alias in (field.alias, field.validation_alias, field.serialization_alias):
                if isinstance(alias, str) and alias != name:
                    cached[alias] = name
        type.__setattr__(cls, "_agentenv_aliases", cached)
    return cached


def _camel_fallback(original: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def __getattr__(self: Any, name: str) -> Any:
        try:
            return original(self, name)
        except AttributeError:
            field = _alias_map(type(self)).get(name)
            if field is None:
                raise
            return getattr(self, field)

    __getattr__._agentenv_compat = True  # type: ignore[attr-defined]
    return __getattr__


def install_attribute_aliases() -> None:
    """Let mcp 2.x models answer their 1.x (camelCase) attribute names. Idempotent."""
    global _installed
    if _installed or not needs_compat():
        return
    import importlib

    for module_name, class_name in (("mcp_types._types", "MCPModel"),
                                    ("mcp_types._wire_base", "WireModel")):
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue
        current = cls.__getattr__
        if not getattr(current, "_agentenv_compat", False):
            cls.__getattr__ = _camel_fallback(current)
    _installed = True


# -- the 1.x view of mcp.client.streamable_http -------------------------------------------------


def unpacks_two(source: str) -> bool:
    """True when the script writes ``... streamable_http_client(...) as (a, b)`` (2.x style)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if not isinstance(node, ast.With | ast.AsyncWith):
            continue
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else "")
            target = item.optional_vars
            if name in STREAM_FUNCTIONS and isinstance(target, ast.Tuple | ast.List) \
                    and len(target.elts) == 2:
                return True
    return False


class _SessionId:
    """Remembers the ``mcp-session-id`` the server hands out (1.x's ``get_session_id``)."""

    def __init__(self) -> None:
        self.value: str | None = None

    async def capture(self, response: Any) -> None:
        found = response.headers.get(SESSION_HEADER)
        if found:
            self.value = found

    def get(self) -> str | None:
        return self.value


@contextlib.asynccontextmanager
async def _three_streams(url: str, http_client: Any, owned: bool,
                         terminate_on_close: bool) -> AsyncIterator[tuple[Any, Any, Any]]:
    from mcp.client import streamable_http

    session = _SessionId()
    http_client.event_hooks["response"].append(session.capture)
    async with contextlib.AsyncExitStack() as stack:
        if owned:
            await stack.enter_async_context(http_client)
        streams = await stack.enter_async_context(streamable_http.streamable_http_client(
            url, http_client=http_client, terminate_on_close=terminate_on_close))
        yield streams[0], streams[1], session.get


def streamable_http_client(url: str, *, http_client: Any = None,
                           terminate_on_close: bool = True) -> Any:
    """mcp 1.24+'s signature: yields ``(read, write, get_session_id)``."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    owned = http_client is None
    client = create_mcp_http_client() if owned else http_client
    return _three_streams(url, client, owned, terminate_on_close)


def streamablehttp_client(url: str, headers: dict[str, str] | None = None,
                          timeout: float = 30, sse_read_timeout: float = 300,
                          terminate_on_close: bool = True, httpx_client_factory: Any = None,
                          auth: Any = None) -> Any:
    """mcp 1.x's older name and signature: yields ``(read, write, get_session_id)``."""
    import httpx2
    from mcp.shared._httpx_utils import create_mcp_http_client

    seconds = getattr(timeout, "total_seconds", lambda: timeout)()
    read = getattr(sse_read_timeout, "total_seconds", lambda: sse_read_timeout)()
    limits = httpx2.Timeout(float(seconds), read=float(read))
    factory = httpx_client_factory or create_mcp_http_client
    client = factory(headers=headers, timeout=limits, auth=auth)
    return _three_streams(url, client, True, terminate_on_close)


def streams_module_1x() -> types.ModuleType:
    """``mcp.client.streamable_http`` as a 1.x script sees it: the real module's names, with
    the two client functions yielding three values."""
    import importlib

    real = importlib.import_module(STREAMS_MODULE)
    view = types.ModuleType(STREAMS_MODULE, real.__doc__)
    view.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
    view.streamable_http_client = streamable_http_client  # type: ignore[attr-defined]
    view.streamablehttp_client = streamablehttp_client  # type: ignore[attr-defined]
    return view


def script_builtins(source: str, *, uses_mcp: bool = True) -> dict[str, Any] | None:
    """Builtins for a verify script's module (None: it needs no compatibility view).

    Its ``__import__`` hands the script the 1.x view of ``mcp.client.streamable_http``; every
    other import is the ordinary one. ``uses_mcp``: whether the script or a module beside it
    imports ``mcp``; when none does, the camelCase aliases are not installed, because that
    imports ``mcp_types`` (pydantic: about 0.3 s) between a ready env and its verdict."""
    if not needs_compat():
        return None
    if uses_mcp:
        install_attribute_aliases()
    if unpacks_two(source) or STREAMS_MODULE not in source:
        return None
    view: list[types.ModuleType] = []
    real_import = builtins.__import__

    def compat_import(name: str, globals: Any = None, locals: Any = None,
                      fromlist: Any = (), level: int = 0) -> Any:
        if name == STREAMS_MODULE and fromlist and level == 0:
            if not view:
                view.append(streams_module_1x())
            return view[0]
        return real_import(name, globals, locals, fromlist, level)

    return {**vars(builtins), "__import__": compat_import}

"""The gateway: one authenticated MCP endpoint in front of N env servers.

Run it as::

    python -m agentenv_protocol.gateway --child URL [--child URL ...] [--host 0.0.0.0]
        [--port 18765] [--token TOKEN] [--mode performance|consistent] [--name NAME]
        [--call-timeout 30] [--ready-timeout 120] [--internal-url URL]
        [--max-body-bytes N] [--prefer-json] [--header-timeout 10] [--body-timeout 30]
        [--trajectory-dir DIR] [--website NAME=FRONTEND_URL,BACKEND_URL ...]

``--token`` defaults to ``$AGENTENV_GATEWAY_TOKEN``; without either a random token is made and
the capability URL printed. Every route needs the token, as ``Authorization: Bearer <token>``
or inside the path as a capability URL, ``/t/<token>/...`` (e.g. ``/t/<token>/mcp``), so a
stock MCP client given only a URL gets through. Anything else is a bare 401.

Routes (each also under ``/t/<token>``): ``/mcp`` (one flat tool namespace over all
children), ``/.well-known/agent-env.json`` (composed card, children under
``children_environments`` with endpoints rewritten to ``/env/<child>/...``), ``/env/<child>/...``
(a pass-through to that child; also to an ``--aside NAME=URL`` server, which serves no tool of
the namespace and is not a child: a developer's tool such as the env state's ``db-mcp``),
``/agentenv`` (data plane: ``data/reset`` fans out; add/get go
to the only child serving them), ``/ready``, ``/state``, ``/trajectory`` (JSON lines, paged
with ``?after=<event_id>&limit=`` or ``?offset=&limit=`` in events; kept in a file,
:mod:`.trajectory_log`), ``POST /trajectory/clear`` (empties it; event ids keep counting, so a
cursor stays valid), ``/tools/disable``,
``/tools/enable``, clock/v1 (``/clock/set-time|time|clear|state``) and triggers/v1
(``/triggers/register|remove|clear|state|next|ack``, :mod:`.triggers`). With ``--website``
also ``/website/<name>/...`` and ``/svc/<name>/...`` (a website's frontend and backend, each
request an ``http_request`` trajectory event, :mod:`.websites`) and a ``list_website_urls``
tool.

``/ready`` is live: it asks every child's ``/ready`` (within ``--ready-probe-timeout``, 2 s), so
a killed or frozen env server makes it 503 with the child named under ``down``. Connections
are guarded (:mod:`.guard`): a request head must arrive within ``--header-timeout``, a body
within ``--body-timeout``, unauthenticated connections per client are capped (a 401 also
closes its connection), and a malformed request is a 400/401 and one log line, never a
traceback.

Children are waited for (``GET /ready`` 200; a server without ``/ready``, whose ``/ready``
answers 4xx, is ready when ``/mcp`` answers below 500). A tool name served by two children
is served by none, reported on ``/state``, and keeps ``/ready`` at 503. Calls carry the
caller's role and session to the child in ``_meta``. In ``performance`` mode calls run
concurrently; ``consistent`` runs them one at a time. Trajectory events: ``tool_call``;
then ``tool_call_result`` when the child answered (``is_error`` tells a tool-level failure;
``changelog_id_before`` and ``changelog_id`` when the child keeps a changelog,
:mod:`.changes`) or ``tool_call_failed`` when it did not (timeout, unreachable) or the
gateway refused the call. A child's ``GET /changes`` is read
through its pass-through, ``/env/<child>/changes``.

A forwarded call fails fast when its env server is gone: once a call (tool, data plane or
pass-through) has waited ``LIVENESS_INTERVAL``, the gateway tries a TCP connection to the child
every ``LIVENESS_INTERVAL``; when one cannot open within ``LIVENESS_TIMEOUT`` (refused, no route,
nothing answering at the address: a killed container sends no reset, so without this the call
waits out ``--call-timeout``), the call fails as ``env_unavailable`` within about a second,
naming the env, and the next calls to it fail at once while it stays unreachable. A child that is
alive but slow (a long tool, a blocked or frozen process) still accepts connections in its
kernel, so it is waited for up to the call timeout as before.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hmac
import itertools
import json
import os
import re
import secrets
import sys
import time
import zoneinfo
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import attrs
from aiohttp import web

from . import jsonrpc
from .access import AccessRuleError, Caller, ToolAccessRules
from .card import (
    Capabilities,
    EnvironmentCard,
    ExtensionInfo,
    Interface,
    ToolInfo,
)
from .changes import CHANGELOG_META_KEY
from .client import McpClient, fetch_card_raw
from .clock import CLOCK_URI, ClockError, VirtualClock
from .errors import AgentEnvError, ProtocolError, TransportError
from .fast_lane import FastLane
from .guard import (
    Limits,
    LineLog,
    guard_app,
    loads_body,
    note_refused,
    run_guarded,
    vouch_for,
)
from .http1 import Http1Pool
from .mcp_http import McpEndpoint, error_response, json_response
from .trajectory_log import TrajectoryLog
from .triggers import FEATURES as TRIGGER_FEATURES
from .triggers import TRIGGERS_URI, TriggerError, Triggers
from .websites import Site, Websites, parse_site
from .wire import HIDDEN_META_KEY, ROLE_META_KEY, SESSION_META_KEY

DEFAULT_PORT = 18765
#: How long a forwarded call waits before its child's liveness is checked, and between checks.
LIVENESS_INTERVAL = 0.25
#: How long a liveness check waits for a TCP connection to the child.
LIVENESS_TIMEOUT = 0.4
#: How long a starting child's readiness is polled every 20 ms before backing off.
FINE_POLL_SECONDS = 10.0
MODES = ("performance", "consistent")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_HOP_HEADERS = frozenset({"host", "authorization", "connection", "keep-alive", "content-length",
                          "transfer-encoding", "upgrade", "te", "trailer",
                          "proxy-authorization"})
_GET_TIME_TOOL = {
    "name": "get_time",
    "description": "The current virtual time (clock/v1), optionally in an IANA time zone.",
    "inputSchema": {"type": "object", "properties": {"time_zone": {
        "type": "string", "description": "IANA time zone, e.g. Europe/Paris (default UTC)."}}},
}


def _now_utc() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _tool_error(code: str, message: str, *, retryable: bool = False,
                applied: str = "no") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{code}: {message}"}],
            "structuredContent": {"code": code, "message": message, "retryable": retryable,
                                  "applied": applied},
            "isError": True}


class Child:
    """One env server behind the gateway: its card, MCP session and tools."""

    def __init__(self, url: str, index: int) -> None:
        self.url = url.rstrip("/")
        self.index = index
        self.name = f"env{index}"
        self.card: dict[str, Any] | None = None
        self.client: McpClient | None = None
        self.tools: list[dict[str, Any]] = []
        self.ready = False
        self.error: str | None = None
        #: Why the child was last found unreachable (a forwarded call failed fast), or None.
        self.gone: str | None = None
        #: Keep-alive connections the MCP calls go over (plain http children; see .http1).
        self.pool: Http1Pool | None = None

    async def unreachable(self) -> str | None:
        """Why no TCP connection to the child opens within ``LIVENESS_TIMEOUT``, or None when
        one does (the child's kernel accepts even while its process is busy or frozen)."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                               LIVENESS_TIMEOUT)
        except TimeoutError:
            return f"nothing accepts connections at {host}:{port} (its container stopped?)"
        except OSError as exc:
            return f"{exc.strerror or exc} at {host}:{port}"
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return None

    async def watched(self, call: Awaitable[Any]) -> Any:
        """Await a forwarded call, failing it with :class:`TransportError` as soon as the child
        is found unreachable (see the module docstring); a known-gone child is checked once
        first, so calls to it fail at once.

        A call that answers within ``LIVENESS_INTERVAL`` (nearly all) costs one timer: the
        watcher task starts only when the timer fires, and cancels this task if the child is
        gone (the watcher only runs while this task waits inside ``call``)."""
        if self.gone is not None:
            why = await self.unreachable()
            if why is not None:
                if asyncio.iscoroutine(call):
                    call.close()
                raise TransportError(f"environment {self.name!r} is gone: {why}")
            self.gone = None
        caller = asyncio.current_task()
        assert caller is not None
        loop = asyncio.get_running_loop()
        watch = _Watch()

        async def watcher() -> None:
            while True:
                why = await self.unreachable()
                if why is not None:
                    watch.why = self.gone = why
                    caller.cancel()
                    return
                await asyncio.sleep(LIVENESS_INTERVAL)

        def start() -> None:
            watch.task = loop.create_task(watcher())

        timer = loop.call_later(LIVENESS_INTERVAL, start)
        try:
            return await call
        except asyncio.CancelledError:
            if watch.why is None:
                raise  # the caller's own cancellation
            caller.uncancel()
            raise TransportError(f"environment {self.name!r} is gone: {watch.why}") from None
        finally:
            timer.cancel()
            if watch.task is not None:
                watch.task.cancel()

    async def wait_ready(self, http: aiohttp.ClientSession, timeout: float) -> None:
        """Poll ``/ready`` (200), or ``/mcp`` (< 500) for servers without ``/ready``."""
        started = time.monotonic()
        deadline = started + timeout
        delay = 0.02
        probe = aiohttp.ClientTimeout(total=2)
        while True:
            try:
                async with http.get(self.url + "/ready", timeout=probe) as resp:
                    status = resp.status
                if status == 200:
                    return
                if 400 <= status < 500:  # no /ready route (Playwright MCP answers 400)
                    async with http.get(self.url + "/mcp", timeout=probe) as resp:
                        if resp.status < 500:
                            return
            except (TimeoutError, aiohttp.ClientError):
                pass
            if time.monotonic() > deadline:
                raise TransportError(f"{self.url} was not ready within {timeout:g}s")
            await asyncio.sleep(delay)
            # Finely while a child starts (a refused connection costs microseconds, and a
            # doubling wait noticed a child coming up a quarter second late); then back off.
            if time.monotonic() - started > FINE_POLL_SECONDS:
                delay = min(delay * 2, 0.5)

    async def connect(self, http: aiohttp.ClientSession, call_timeout: float) -> None:
        """Read the card, open the MCP session and list every tool."""
        try:
            self.card = await fetch_card_raw(self.url, session=http)
        except TransportError:
            self.card = None  # a server without a card still serves MCP
        mcp_path = "/mcp"
        if self.card is not None:
            with contextlib.suppress(Exception):
                mcp_path = EnvironmentCard.from_wire(self.card).mcp_path
        url = self.url + mcp_path
        if self.pool is None and Http1Pool.usable_for(url):
            self.pool = Http1Pool(url)
        self.client = McpClient(url, session=http, timeout=call_timeout,
                                client_name="agentenv-gateway", pool=self.pool)
        init = await self.client.connect()
        name = (self.card or {}).get("name") or (init.get("serverInfo") or {}).get("name")
        if name:
            self.name = re.sub(r"[^A-Za-z0-9_.-]", "-", str(name))
        self.tools = await self.client.list_tools_raw()


@attrs.define
class _Watch:
    """A forwarded call's liveness watcher: its task once started, and why the child is gone."""

    task: asyncio.Task[None] | None = None
    why: str | None = None


class Gateway:
    """State and handlers of one gateway deployment."""

    def __init__(self, children: Sequence[str], *, token: str | None, mode: str = "performance",
                 name: str = "gateway", call_timeout: float = 30.0, ready_timeout: float = 120.0,
                 internal_url: str | None = None, trajectory_dir: str | None = None,
                 ready_probe_timeout: float = 2.0,
                 asides: Mapping[str, str] | None = None,
                 websites: Sequence[Site] = ()) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not children and not websites:
            raise ValueError("a gateway needs at least one child URL or website")
        self.token = token
        self.mode = mode
        self.name = name
        self.call_timeout = call_timeout
        self.ready_timeout = ready_timeout
        self.internal_url = internal_url.rstrip("/") if internal_url else None
        self.children = [Child(u, i) for i, u in enumerate(children)]
        #: Servers reached only through ``/env/<name>/...`` (see the module).
        self.asides = {name: url.rstrip("/") for name, url in (asides or {}).items()}
        #: A ``website`` env's sites (:mod:`.websites`).
        self.websites = Websites({site.name: site for site in websites}, self._record_http,
                                 internal_url=self.internal_url)
        self.by_name: dict[str, Child] = {}
        self.tools: dict[str, tuple[Child, dict[str, Any]]] = {}
        self.clashes: dict[str, list[str]] = {}
        self.rules = ToolAccessRules()
        self.clock = VirtualClock()
        self.triggers = Triggers(self.clock, self._trigger_call, self._trigger_access,
                                 lambda: set(self.tools))
        #: The session of calls a trigger makes (they provoke no trigger themselves).
        self._trigger_session = f"trigger-{secrets.token_hex(6)}"
        self._trigger_calls = itertools.count(1)
        self.trajectory = TrajectoryLog(trajectory_dir)
        self.ready_probe_timeout = ready_probe_timeout
        self._probe: asyncio.Task[dict[str, str]] | None = None
        self._event_ids = itertools.count(1)
        #: Events dropped by ``/trajectory/clear``: event ``evt-N`` is at offset N-1-cleared.
        self._cleared = 0
        self._listing: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()
        self._http: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.in_flight = 0
        self.calls = 0
        self.last_internal_url: str | None = None

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self, app: web.Application) -> None:
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(total=self.call_timeout))
        self._tasks = [asyncio.create_task(self._bring_up(c)) for c in self.children]
        if self.websites.sites:
            self._tasks.append(asyncio.create_task(
                self.websites.bring_up(self._http, self.ready_timeout)))

    async def stop(self, app: web.Application) -> None:
        await self.triggers.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        for child in self.children:
            if child.client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(child.client.close(), 2)
            if child.pool is not None:
                child.pool.close()
        if self._http is not None:
            await self._http.close()
        self.trajectory.close()

    async def wait_settled(self, timeout: float | None = None) -> bool:
        """Wait until every child is connected or has failed its first readiness wait."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_outcomes(), timeout)
        return self.ready

    async def _first_outcomes(self) -> None:
        while any(not c.ready and c.error is None for c in self.children) or \
                any(why == "not probed yet" for why in self.websites.waiting.values()):
            await asyncio.sleep(0.01)

    async def _bring_up(self, child: Child) -> None:
        """Wait for a child and connect; keep retrying in the background after a failure."""
        assert self._http is not None
        while True:
            try:
                await child.wait_ready(self._http, self.ready_timeout)
                await child.connect(self._http, self.call_timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                child.error = str(exc) or type(exc).__name__
                await asyncio.sleep(1.0)
                continue
            child.ready = True
            child.error = None
            self._rebuild()
            return

    def _rebuild(self) -> None:
        """One flat namespace; a name served by two children is served by none."""
        self.by_name = {}
        for child in self.children:
            if child.ready:
                name = child.name
                n = 2
                while name in self.by_name:
                    name = f"{child.name}-{n}"
                    n += 1
                child.name = name
                self.by_name[name] = child
        owners: dict[str, list[tuple[Child, dict[str, Any]]]] = {}
        for child in self.children:
            for tool in child.tools if child.ready else []:
                owners.setdefault(tool["name"], []).append((child, tool))
        self.tools = {n: o[0] for n, o in owners.items() if len(o) == 1}
        self.clashes = {n: [c.name for c, _ in o] for n, o in owners.items() if len(o) > 1}
        self._listing = [tool for _, tool in self.tools.values()]

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self.children) and not self.clashes \
            and self.websites.ready

    # -- MCP ToolHost -----------------------------------------------------------------------
    def _visible(self, tool: dict[str, Any], role: str | None) -> bool:
        hidden = bool((tool.get("_meta") or {}).get(HIDDEN_META_KEY))
        return self.rules.allowed(role, tool["name"], hidden=hidden)

    def mcp_tools(self, caller: Caller) -> Sequence[dict[str, Any]]:
        if self.rules or any((t.get("_meta") or {}).get(HIDDEN_META_KEY)
                             for t in self._listing):
            listing = [t for t in self._listing if self._visible(t, caller.role)]
        else:
            listing = self._listing
        if self.clock.armed and "get_time" not in self.tools:
            listing = [*listing, _GET_TIME_TOOL]
        if self.websites.sites and "list_website_urls" not in self.tools:
            listing = [*listing, self.websites.list_tool()]
        return listing

    def _append(self, kind: str, role: str, **fields: Any) -> None:
        """One trajectory event: its id, type, time (and virtual time while the clock is
        armed), role and ``fields``."""
        event = {"event_id": f"evt-{next(self._event_ids)}", "type": kind,
                 "timestamp_utc": _now_utc(), "role": role, **fields}
        if self.clock.armed:
            event["virtual_time"] = self.clock.now_iso()
        self.trajectory.append(event)

    def _record(self, kind: str, call_id: str, caller: Caller, tool: str,
                **fields: Any) -> None:
        self._append(kind, caller.role or "default", session=caller.session, call_id=call_id,
                     tool=tool, **fields)

    def _record_http(self, **fields: Any) -> None:
        """An ``http_request`` event (a website request, :mod:`.websites`)."""
        self._append("http_request", "default", **fields)

    async def mcp_call(self, name: str, arguments: dict[str, Any], caller: Caller,
                       call_id: str) -> dict[str, Any]:
        self.calls += 1
        call_id = f"{caller.session or '-'}:{call_id}"
        self._record("tool_call", call_id, caller, name, arguments=arguments,
                     duration_ms=None)
        start = time.perf_counter()
        entry = self.tools.get(name)
        if entry is None:
            own = None
            if name == "get_time" and self.clock.armed:
                own = self._get_time(arguments)
            elif name == "list_website_urls" and self.websites.sites:
                own = self.websites.list_result()
            if own is not None:
                result = own
                self._record("tool_call_result", call_id, caller, name, env=None,
                             is_error=bool(result.get("isError")), result=result,
                             duration_ms=_ms(start))
                return result
            if name in self.clashes:
                message = (f"tool {name!r} is served by several environments "
                           f"({', '.join(self.clashes[name])}) and is disabled")
                result = _tool_error("tool_name_clash", message)
            else:
                result = {"content": [{"type": "text", "text": f"Unknown tool: {name}"}],
                          "isError": True}
            self._record("tool_call_failed", call_id, caller, name, env=None,
                         error=result["content"][0]["text"], duration_ms=_ms(start))
            return result
        child, listing = entry
        if not self._visible(listing, caller.role):
            result = _tool_error("permission_denied",
                                 f"tool {name!r} is not allowed for role "
                                 f"{caller.role or 'default'!r}")
            self._record("tool_call_failed", call_id, caller, name, env=child.name,
                         error="permission_denied", duration_ms=_ms(start))
            return result
        meta = {ROLE_META_KEY: caller.role or "default", SESSION_META_KEY: caller.session}
        assert child.client is not None
        self.in_flight += 1
        try:
            if self.mode == "consistent":
                async with self._lock:
                    result = await child.watched(
                        child.client.call_tool_raw(name, arguments, meta=meta))
            else:
                result = await child.watched(
                    child.client.call_tool_raw(name, arguments, meta=meta))
        except (TransportError, ProtocolError) as exc:
            timed_out = isinstance(exc, TransportError) and "within" in str(exc)
            cut = timed_out or child.gone is not None  # it may have applied it before dying
            if isinstance(exc, TransportError) and exc.unsent and child.gone is None:
                # no connection opened (its container gone, its name no longer resolving):
                # say so as the liveness watcher would; the call was never sent
                why = await child.unreachable()
                if why is not None:
                    child.gone = why
                    exc = TransportError(f"environment {child.name!r} is gone: {why}")
            message = f"environment {child.name!r} failed tool {name!r}: {exc}"
            self._record("tool_call_failed", call_id, caller, name, env=child.name,
                         error=message, duration_ms=_ms(start))
            return _tool_error("env_timeout" if timed_out else "env_unavailable", message,
                               retryable=True,
                               applied="unknown" if cut else "no")
        finally:
            self.in_flight -= 1
        ids = (result.get("_meta") or {}).get(CHANGELOG_META_KEY)
        logged = {"changelog_id_before": ids.get("before"), "changelog_id": ids.get("after")} \
            if isinstance(ids, dict) else {}  # the child keeps a changelog (changes/v1)
        self._record("tool_call_result", call_id, caller, name, env=child.name,
                     is_error=bool(result.get("isError")), result=result,
                     duration_ms=_ms(start), **logged)
        if self.triggers.active and caller.session != self._trigger_session:
            self.triggers.on_tool_call(caller.role or "default", name, arguments, result)
        return result

    async def _trigger_call(self, tool: str, arguments: dict[str, Any],
                            role: str) -> dict[str, Any]:
        """A tool call a trigger's action makes: recorded like any, provoking nothing."""
        return await self.mcp_call(tool, arguments, Caller(role, self._trigger_session),
                                   f"trigger-{next(self._trigger_calls)}")

    def _tool_flags(self) -> dict[str, bool]:
        """Every tool's name and whether it is hidden by default (for access rules)."""
        return {n: bool((t.get("_meta") or {}).get(HIDDEN_META_KEY))
                for n, (_, t) in self.tools.items()}

    def _trigger_access(self, body: dict[str, Any], allow: bool) -> None:
        self.rules.apply(body, allow=allow, tools=self._tool_flags())

    def _get_time(self, arguments: dict[str, Any]) -> dict[str, Any]:
        tz_name = arguments.get("time_zone") or "UTC"
        try:
            tz = zoneinfo.ZoneInfo(str(tz_name))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return _tool_error("invalid_params", f"unknown time zone {tz_name!r}")
        now = self.clock.now()
        assert now is not None
        local = now.astimezone(tz).isoformat()
        return {"content": [{"type": "text", "text": local}],
                "structuredContent": {"virtual_time": local, "time_zone": str(tz_name)},
                "isError": False}

    # -- plain routes -----------------------------------------------------------------------
    async def ready_route(self, request: web.Request) -> web.Response:
        """Ready when every child is connected, no tool name clashes, and every child answers
        its ``/ready`` now (a killed or frozen env server is ``down``)."""
        down = await self.probe_children() if self.ready else {}
        if self.ready and not down and self.websites.sites:
            assert self._http is not None
            down = {f"website {name}": why
                    for name, why in (await self.websites.probe(self._http)).items()}
        if self.ready and not down:
            return json_response({"ready": True})
        return json_response({"ready": False, "clashes": self.clashes,
                              "waiting": [c.url for c in self.children if not c.ready]
                              + [f"website {name}: {why}"
                                 for name, why in self.websites.waiting.items()],
                              "down": down}, status=503)

    async def probe_children(self) -> dict[str, str]:
        """``{child name: why}`` for children not answering ``/ready`` within the probe
        timeout; concurrent callers share one probe."""
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._probe_children())
        return await asyncio.shield(self._probe)

    async def _probe_children(self) -> dict[str, str]:
        assert self._http is not None
        http = self._http
        timeout = aiohttp.ClientTimeout(total=self.ready_probe_timeout)

        async def probe(child: Child) -> str | None:
            try:
                async with http.get(child.url + "/ready", timeout=timeout) as resp:
                    if resp.status == 200:
                        return None
                    if 400 <= resp.status < 500:  # a server without /ready: /mcp below 500
                        async with http.get(child.url + "/mcp", timeout=timeout) as mcp:
                            return None if mcp.status < 500 else f"/mcp answered {mcp.status}"
                    return f"/ready answered {resp.status}"
            except TimeoutError:
                return f"no answer within {self.ready_probe_timeout:g}s (frozen or gone)"
            except aiohttp.ClientError as exc:
                return f"unreachable ({type(exc).__name__})"

        outcomes = await asyncio.gather(*(probe(c) for c in self.children))
        return {c.name: why for c, why in zip(self.children, outcomes, strict=True) if why}

    async def state_route(self, request: web.Request) -> web.Response:
        return json_response({
            "name": self.name, "mode": self.mode, "ready": self.ready,
            "children": [{"name": c.name, "url": c.url, "ready": c.ready, "error": c.error,
                          "tools": [t["name"] for t in c.tools]} for c in self.children],
            "tools": {n: c.name for n, (c, _) in sorted(self.tools.items())},
            "clashes": self.clashes,
            "websites": {name: {"frontend": site.frontend, "backend": site.backend,
                                "ready": name not in self.websites.waiting,
                                "error": self.websites.waiting.get(name)}
                         for name, site in self.websites.sites.items()},
            "rules": self.rules.snapshot(),
            "clock": self.clock.state(self._time_url(request)),
            "calls": {"total": self.calls, "in_flight": self.in_flight,
                      "events": len(self.trajectory)},
        })

    async def trajectory_route(self, request: web.Request) -> web.StreamResponse:
        """JSON lines, ``?after=<event_id>&limit=M`` (the events after that one) or
        ``?offset=N&limit=M`` (in events; default: all), streamed from the file.
        ``AgentEnv-Trajectory-Events`` says how many there are in all, ``...-Has-More``
        whether a page left some out, and ``...-Last-Id`` the last event sent (the next
        page's ``after``)."""
        query = request.query
        try:
            limit = int(query["limit"]) if "limit" in query else None
            if "after" in query:
                if "offset" in query:
                    return _bad_request("give after or offset, not both")
                match = re.fullmatch(r"evt-(\d+)", query["after"])
                if match is None:
                    return _bad_request("after must be an event id (evt-N) from this trajectory")
                offset = max(int(match.group(1)) - self._cleared, 0)
            else:
                offset = int(query.get("offset", "0"))
            if offset < 0 or (limit is not None and limit < 0):
                raise ValueError("negative")
        except ValueError:
            return _bad_request("offset and limit must be whole numbers, 0 or more")
        total = len(self.trajectory)
        start = min(offset, total)
        stop = total if limit is None else min(total, start + limit)
        headers = {"Content-Type": "application/x-ndjson",
                   "AgentEnv-Trajectory-Events": str(total),
                   "AgentEnv-Trajectory-Has-More": "true" if stop < total else "false"}
        if stop > start:
            headers["AgentEnv-Trajectory-Last-Id"] = f"evt-{stop + self._cleared}"
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        for chunk in self.trajectory.chunks(start, stop - start):
            await response.write(chunk)
        await response.write_eof()
        return response

    async def trajectory_clear_route(self, request: web.Request) -> web.Response:
        """Empty the trajectory: a reused env's next episode starts with none of the last's."""
        dropped = self.trajectory.clear()
        self._cleared += dropped
        return json_response({"ok": True, "cleared": dropped})

    async def card_route(self, request: web.Request) -> web.Response:
        return json_response(self.card().to_wire())

    def card(self) -> EnvironmentCard:
        """The composed card: the flat tool namespace plus every child's card, rewritten."""
        tools = [ToolInfo(n, t.get("description") or "", t.get("inputSchema") or {})
                 for n, (_, t) in self.tools.items()]
        clock_ext = ExtensionInfo(CLOCK_URI, "Virtual time served by the gateway.", {
            "endpoint": "/clock",
            "methods": {
                "set-time": {"method": "PUT", "endpoint": "/clock/set-time", "request": {
                    "type": "object", "required": ["virtual_time"], "properties": {
                        "virtual_time": {"type": "string", "format": "date-time"},
                        "virtual_seconds_per_real_second": {
                            "type": "number", "minimum": 0, "maximum": 86400}}}},
                "time": {"method": "GET", "endpoint": "/clock/time",
                         "request": {"type": "object"}},
                "clear": {"method": "POST", "endpoint": "/clock/clear",
                          "request": {"type": "object"}},
                "state": {"method": "GET", "endpoint": "/clock/state",
                          "request": {"type": "object"}},
            }}, False)
        obj = {"type": "object"}
        triggers_ext = ExtensionInfo(TRIGGERS_URI, "Triggers: a tool call or a virtual time "
                                     "fires tool, permission or prompt (nl) actions.", {
            "endpoint": "/triggers/register", "features": list(TRIGGER_FEATURES),
            "methods": {name: {"method": "GET" if name == "state" else "POST",
                               "endpoint": f"/triggers/{name}", "request": obj}
                        for name in ("register", "remove", "clear", "state", "next", "ack")},
        }, False)
        children = []
        for child in self.children:
            if child.card is None or not child.ready:
                continue
            with contextlib.suppress(Exception):
                children.append(_rewrite_card(EnvironmentCard.from_wire(child.card),
                                              f"/env/{child.name}"))
        return EnvironmentCard(
            name=self.name,
            capabilities=Capabilities(extensions=[clock_ext, triggers_ext], tools=tools or None,
                                      operations=self._operations()),
            children_environments=children,
        )

    def _child_ops(self) -> dict[str, list[Child]]:
        ops: dict[str, list[Child]] = {}
        for child in self.children:
            if not child.ready:
                continue
            served = ((child.card or {}).get("capabilities") or {}).get("operations")
            if served is None:
                served = ["data/reset", "data/add", "data/get"]
            for op in served:
                ops.setdefault(op, []).append(child)
        return ops

    def _operations(self) -> list[str]:
        ops = self._child_ops()
        return [op for op in ("data/reset", "data/add", "data/get")
                if (op == "data/reset" and ops.get(op)) or len(ops.get(op, [])) == 1]

    async def dataplane_route(self, request: web.Request) -> web.Response:
        """``data/reset`` fans out to every child serving it; add/get go to the only one; a
        batch runs its calls in order (:mod:`.jsonrpc`)."""
        return await jsonrpc.route(request, self._data_call)

    async def _data_call(self, msg: Any) -> dict[str, Any]:
        """One data-plane call, forwarded: its response object."""
        checked = jsonrpc.envelope(msg)
        if isinstance(checked, dict):
            return checked
        msg_id, method = checked
        targets = self._child_ops().get(method, [])
        if method not in self._operations():
            return jsonrpc.error(msg_id, -32601, f"method not found: {method}")
        assert self._http is not None
        body = json.dumps(msg).encode()
        replies = await asyncio.gather(*(self._forward_rpc(c, body) for c in targets))
        for reply in replies:
            if "error" in reply:
                return jsonrpc.reply(msg_id, error=reply["error"])
        return jsonrpc.reply(msg_id, result=replies[0].get("result", {}) if len(replies) == 1
                             else {})

    async def _forward_rpc(self, child: Child, body: bytes) -> dict[str, Any]:
        assert self._http is not None
        path = ((child.card or {}).get("url")) or "/agentenv"
        http = self._http

        async def post() -> Any:
            async with http.post(child.url + path, data=body,
                                 headers={"Content-Type": "application/json"}) as resp:
                return json.loads(await resp.read())

        try:
            reply = await child.watched(post())
            return reply if isinstance(reply, dict) else {}
        except (TimeoutError, aiohttp.ClientError, ValueError, TransportError) as exc:
            return {"error": {"code": -32000, "message": f"{child.name}: {exc or 'timeout'}",
                              "data": {"code": "env_unavailable"}}}

    async def proxy_route(self, request: web.Request) -> web.StreamResponse:
        """Pass ``/env/<child>/<path>`` through to that child (data plane, extensions, MCP)."""
        name = request.match_info["child"]
        child = self.by_name.get(name)
        base = child.url if child is not None else self.asides.get(name)
        if base is None:
            return error_response(AgentEnvError("not_found", "no such environment", status=404))
        assert self._http is not None
        tail = request.match_info["tail"]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        http, data = self._http, await request.read()

        async def forward() -> web.Response:
            async with http.request(
                    request.method, f"{base}/{tail}", params=request.query,
                    data=data, headers=headers, allow_redirects=False) as resp:
                body = await resp.read()
                out = {k: v for k, v in resp.headers.items()
                       if k.lower() not in _HOP_HEADERS and k.lower() not in (
                           "content-encoding", "date", "server")}
                return web.Response(body=body, status=resp.status, headers=out)

        try:
            response: web.Response = await (child.watched(forward()) if child is not None
                                            else forward())
            return response
        except (TimeoutError, aiohttp.ClientError, TransportError) as exc:
            return error_response(AgentEnvError(
                "env_unavailable", f"{name}: {exc or 'timeout'}", retryable=True,
                applied="unknown", status=502))

    async def tools_access_route(self, request: web.Request) -> web.Response:
        allow = request.path.endswith("/enable")
        try:
            body = loads_body(await request.read() or b"{}")
            return json_response(self.rules.apply(body, allow=allow, tools=self._tool_flags()))
        except (ValueError, AccessRuleError) as exc:
            return _bad_request(str(exc))

    # -- triggers/v1 (see .triggers) ---------------------------------------------------------
    async def triggers_route(self, request: web.Request) -> web.Response:
        operation = request.path.rsplit("/", 1)[-1]
        try:
            body = loads_body(await request.read() or b"{}")
            if operation == "register":
                return json_response(self.triggers.register(body))
            if operation == "remove":
                return json_response(self.triggers.remove(body))
            if operation == "clear":
                return json_response(self.triggers.clear())
            if operation == "ack":
                return json_response(self.triggers.ack(body))
            wait = body.get("wait", 0) if isinstance(body, dict) else 0
            if isinstance(wait, bool) or not isinstance(wait, (int, float)):
                raise TriggerError("wait must be a number of seconds")
            return json_response({"actions": await self.triggers.next_actions(float(wait))})
        except (ValueError, AccessRuleError) as exc:
            return _bad_request(str(exc))

    async def triggers_state_route(self, request: web.Request) -> web.Response:
        return json_response(self.triggers.state())

    # -- clock/v1 ---------------------------------------------------------------------------
    def _time_url(self, request: web.Request) -> str:
        base = self.internal_url or f"{request.scheme}://{request.host}"
        prefix = f"/t/{self.token}" if self.token else ""
        return f"{base}{prefix}/clock/time"

    async def clock_set_route(self, request: web.Request) -> web.Response:
        try:
            body = loads_body(await request.read() or b"{}")
            if not isinstance(body, dict):
                raise ClockError("body must be a JSON object")
            self.clock.set_time(body.get("virtual_time"),
                                body.get("virtual_seconds_per_real_second"))
        except (ValueError, ClockError) as exc:
            return _bad_request(str(exc))
        url = self._time_url(request)
        synced = await self._sync_children(url)
        return json_response({"ok": True, **self.clock.state(url), "synced": synced})

    async def _sync_children(self, url: str) -> list[str]:
        """Tell children that consume clock/v1 where virtual time is served (best effort)."""
        assert self._http is not None
        synced = []
        for child in self.children:
            exts = ((child.card or {}).get("capabilities") or {}).get("extensions") or []
            endpoints = [m.get("endpoint") for e in exts
                         for m in ((e.get("params") or {}).get("methods") or {}).values()
                         if str(m.get("endpoint", "")).endswith("/sync_time")]
            if not endpoints:
                continue
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with self._http.post(child.url + endpoints[0],
                                           json={"env_get_time_url": url},
                                           timeout=aiohttp.ClientTimeout(total=5)) as resp:
                    if resp.status < 300:
                        synced.append(child.name)
        return synced

    async def clock_time_route(self, request: web.Request) -> web.Response:
        now = self.clock.now_iso()
        if now is None:
            return error_response(AgentEnvError("clock_unarmed", "the clock is not armed",
                                                status=404))
        return json_response({"virtual_time": now})

    async def clock_clear_route(self, request: web.Request) -> web.Response:
        self.clock.clear()
        return json_response({"ok": True, "armed": False})

    async def clock_state_route(self, request: web.Request) -> web.Response:
        return json_response(self.clock.state(self._time_url(request)))


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _bad_request(message: str) -> web.Response:
    return error_response(AgentEnvError("invalid_params", message))


def _rewrite_card(card: EnvironmentCard, prefix: str) -> EnvironmentCard:
    """A child's card with its endpoints moved under ``prefix`` on the gateway."""

    def moved(url: str) -> str:
        return url if "://" in url else prefix + (url if url.startswith("/") else "/" + url)

    exts = None
    if card.capabilities.extensions is not None:
        exts = []
        for ext in card.capabilities.extensions:
            params = dict(ext.params or {})
            if isinstance(params.get("endpoint"), str):
                params["endpoint"] = moved(params["endpoint"])
            methods = {}
            for mname, spec in (params.get("methods") or {}).items():
                spec = dict(spec)
                if isinstance(spec.get("endpoint"), str):
                    spec["endpoint"] = moved(spec["endpoint"])
                methods[mname] = spec
            if "methods" in params:
                params["methods"] = methods
            exts.append(ExtensionInfo(ext.uri, ext.description, params, ext.required))
    return attrs.evolve(
        card,
        url=moved(card.url),
        additional_interfaces=[Interface(moved(i.url), i.transport)
                               for i in card.additional_interfaces],
        capabilities=attrs.evolve(card.capabilities, extensions=exts),
    )


def _auth_middleware(token: str | None, site_token: str | None = None) -> Any:
    """Bearer header or ``/t/<token>`` path; anything else is a bare 401 that also closes the
    connection (so refused clients hold none). A request with the token vouches for its
    connection (the guard's per-client cap then leaves it alone). ``site_token`` (a website
    env's browser holds it) opens ``/website/<name>/...`` only, as a Bearer header: the pages
    an agent browses can reach nothing else of the gateway (no tools, trajectory, clock or
    backend) with it."""
    expected = token.encode() if token else None
    site = site_token.encode() if site_token else None

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if expected is None:
            vouch_for(request)
            return await handler(request)
        given = request.match_info.get("token")
        if given is None:
            header = request.headers.get("Authorization", "")
            given = header[7:].strip() if header[:7].lower() == "bearer " else ""
        # Header bytes that are not UTF-8 arrive as surrogates: they are simply a wrong token.
        raw = given.encode("utf-8", "surrogateescape")
        resource = request.match_info.route.resource
        pattern = resource.canonical if resource is not None else ""
        if site is not None and pattern.startswith("/website/{site}") \
                and hmac.compare_digest(raw, site):
            vouch_for(request)
            return await handler(request)
        if not hmac.compare_digest(raw, expected):
            if not raw.isascii():
                note_refused(request, 401, "a token with bytes that are not ASCII")
            refused = web.Response(status=401, headers={"WWW-Authenticate": "Bearer"})
            refused.force_close()
            return refused
        vouch_for(request)
        return await handler(request)

    return auth


GATEWAY_KEY = web.AppKey("agentenv_gateway", Gateway)
GATEWAY_MCP_KEY = web.AppKey("agentenv_gateway_mcp", McpEndpoint)


def create_gateway_app(
    children: Sequence[str],
    *,
    token: str | None,
    mode: str = "performance",
    name: str = "gateway",
    call_timeout: float = 30.0,
    ready_timeout: float = 120.0,
    internal_url: str | None = None,
    max_body_bytes: int = 32 * 1024 * 1024,
    prefer_json: bool = False,
    page_size: int = 100,
    limits: Limits | None = None,
    trajectory_dir: str | None = None,
    ready_probe_timeout: float = 2.0,
    fast_lane: bool = True,
    asides: Mapping[str, str] | None = None,
    websites: Sequence[Site] = (),
    site_token: str | None = None,
) -> web.Application:
    """Build the gateway app over ``children`` (base URLs of env servers).

    ``token=None`` disables authentication (for tests of unauthenticated setups only).
    ``call_timeout`` bounds each forwarded call; ``ready_timeout`` each child's readiness wait
    (the gateway keeps retrying a failed child in the background). ``internal_url`` is how
    children reach the gateway (for clock/v1's ``env_get_time_url``). ``limits`` are the
    connection guard's (:mod:`.guard`; it applies when served by ``guard.start_guarded``, as
    ``main`` does); ``trajectory_dir`` where the trajectory file lives (default: temp).
    ``fast_lane``: answer plain ``POST /mcp`` requests in the :mod:`.fast_lane` (same
    replies, less CPU); off, aiohttp answers everything. ``asides``: name -> base URL of servers
    reached only through ``/env/<name>/...`` (no tools in the namespace, not in the card);
    ``websites``: a ``website`` env's sites (:mod:`.websites`); ``site_token``: the token
    that opens only their ``/website/...`` pages (the env's browser holds it).
    """
    gateway = Gateway(children, token=token, mode=mode, name=name, call_timeout=call_timeout,
                      ready_timeout=ready_timeout, internal_url=internal_url,
                      trajectory_dir=trajectory_dir, ready_probe_timeout=ready_probe_timeout,
                      asides=asides, websites=websites)
    mcp = McpEndpoint(gateway, server_name=name, prefer_json=prefer_json, page_size=page_size)
    app = web.Application(client_max_size=max_body_bytes,
                          middlewares=[_auth_middleware(token, site_token)])
    app[GATEWAY_KEY] = gateway
    app[GATEWAY_MCP_KEY] = mcp

    def hide(path: str) -> str:
        return path.replace(token, "****") if token else path

    log = LineLog("agentenv_protocol.gateway")
    # POST /mcp, the hot path, skips aiohttp's request machinery (see .fast_lane)
    lane = FastLane(mcp.answer_post, token=token, log=log, hide=hide,
                    max_body=max_body_bytes) if fast_lane else None
    guard_app(app, limits or Limits(), vouch_by_token=True, log=log, hide=hide, lane=lane)
    app.on_startup.append(gateway.start)
    app.on_cleanup.append(gateway.stop)
    app.on_shutdown.append(mcp.close_streams)

    routes: list[tuple[str, str, Handler]] = [
        ("POST", "/mcp", mcp.handle_post),
        ("GET", "/mcp", mcp.handle_get),
        ("DELETE", "/mcp", mcp.handle_delete),
        ("GET", "/.well-known/agent-env.json", gateway.card_route),
        ("POST", "/agentenv", gateway.dataplane_route),
        ("GET", "/ready", gateway.ready_route),
        ("GET", "/state", gateway.state_route),
        ("GET", "/trajectory", gateway.trajectory_route),
        ("POST", "/trajectory/clear", gateway.trajectory_clear_route),
        ("POST", "/tools/disable", gateway.tools_access_route),
        ("POST", "/tools/enable", gateway.tools_access_route),
        ("PUT", "/clock/set-time", gateway.clock_set_route),
        ("GET", "/clock/time", gateway.clock_time_route),
        ("POST", "/clock/clear", gateway.clock_clear_route),
        ("GET", "/clock/state", gateway.clock_state_route),
        *(("POST", f"/triggers/{name}", gateway.triggers_route)
          for name in ("register", "remove", "clear", "next", "ack")),
        ("GET", "/triggers/state", gateway.triggers_state_route),
        ("*", "/env/{child}/{tail:.*}", gateway.proxy_route),
        ("*", "/website/{site}", gateway.websites.website_route),
        ("*", "/website/{site}/{tail:.*}", gateway.websites.website_route),
        ("*", "/svc/{site}", gateway.websites.svc_route),
        ("*", "/svc/{site}/{tail:.*}", gateway.websites.svc_route),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
        if token:
            app.router.add_route(method, "/t/{token}" + path, handler)
    if token:
        async def not_found(request: web.Request) -> web.Response:
            return web.Response(status=404)

        app.router.add_route("*", "/t/{token}/{tail:.*}", not_found)
    return app


def main(argv: Sequence[str] | None = None) -> None:
    """The ``python -m agentenv_protocol.gateway`` entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m agentenv_protocol.gateway",
                                     description="Authenticated MCP gateway over env servers.")
    parser.add_argument("--child", action="append", default=[], metavar="URL",
                        help="base URL of an env server (repeat for several)")
    parser.add_argument("--website", action="append", default=[],
                        metavar="NAME=FRONTEND_URL,BACKEND_URL",
                        help="a website served at /website/NAME/ and /svc/NAME/ (repeat)")
    parser.add_argument("--aside", action="append", default=[], metavar="NAME=URL",
                        help="a server reached only at /env/NAME/... (repeat for several)")
    parser.add_argument("--host", default=os.environ.get("MCP_HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("MCP_PORT", DEFAULT_PORT)))
    parser.add_argument("--token", default=os.environ.get("AGENTENV_GATEWAY_TOKEN"),
                        help="per-deployment token (default $AGENTENV_GATEWAY_TOKEN)")
    parser.add_argument("--mode", choices=MODES, default="performance")
    parser.add_argument("--name", default="gateway")
    parser.add_argument("--call-timeout", type=float, default=30.0)
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--internal-url", default=None,
                        help="how children reach this gateway (clock/v1)")
    parser.add_argument("--max-body-bytes", type=int, default=32 * 1024 * 1024)
    parser.add_argument("--prefer-json", action="store_true",
                        help="answer JSON rather than SSE when a client accepts both")
    parser.add_argument("--header-timeout", type=float, default=Limits().header_timeout,
                        help="seconds a request head may take to arrive (then 408)")
    parser.add_argument("--body-timeout", type=float, default=Limits().body_timeout,
                        help="seconds a request body may take to arrive (then 408)")
    parser.add_argument("--max-pending-per-client", type=int,
                        default=Limits().max_pending_per_client,
                        help="unauthenticated connections one client may hold")
    parser.add_argument("--site-token", default=os.environ.get("AGENTENV_WEBSITE_TOKEN"),
                        help="a token that opens only /website/NAME/ pages (default "
                             "$AGENTENV_WEBSITE_TOKEN)")
    parser.add_argument("--trajectory-dir", default=None,
                        help="where the trajectory file lives (default: the temp folder)")
    args = parser.parse_args(argv)
    asides = dict(aside.split("=", 1) for aside in args.aside if "=" in aside)
    if len(asides) != len(args.aside):
        parser.error("--aside takes NAME=URL")
    try:
        websites = [parse_site(spec) for spec in args.website]
    except ValueError as exc:
        parser.error(str(exc))
    if not args.child and not websites:
        parser.error("give at least one --child URL or --website")
    token = args.token
    if not token:
        token = secrets.token_urlsafe(24)
        print(f"no token given; capability URL: http://{args.host}:{args.port}/t/{token}/mcp",
              file=sys.stderr, flush=True)
    app = create_gateway_app(args.child, token=token, mode=args.mode, name=args.name,
                             call_timeout=args.call_timeout, ready_timeout=args.ready_timeout,
                             internal_url=args.internal_url,
                             max_body_bytes=args.max_body_bytes, prefer_json=args.prefer_json,
                             limits=Limits(header_timeout=args.header_timeout,
                                           body_timeout=args.body_timeout,
                                           max_pending_per_client=args.max_pending_per_client),
                             trajectory_dir=args.trajectory_dir, asides=asides,
                             websites=websites, site_token=args.site_token)
    print(f"agentenv gateway on http://{args.host}:{args.port} over {len(args.child)} child(ren)",
          flush=True)
    run_guarded(app, args.host, args.port)


if __name__ == "__main__":
    main()

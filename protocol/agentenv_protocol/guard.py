"""What aiohttp's server leaves to us: slow or hostile clients, malformed requests, one-line logs.

Shared by the env server and the gateway (both run through :func:`run_guarded`).

* **Slow requests.** aiohttp closes idle keep-alive connections but never a request whose head or
  body arrives slowly, so a client sending a few bytes per connection held 2,000 of them open
  for a minute and more (and, with a lower fd limit, locked a token holder out). :class:`Guard`
  wraps aiohttp's per-connection protocol: a request head must be complete within
  ``header_timeout`` of its first byte, else the connection gets 408 and is closed; the
  :func:`guard_middleware` reads every body within ``body_timeout`` (408 too).
* **Connection cap per client.** At most ``max_pending_per_client`` connections per client
  address (and ``max_pending`` in all) that no request has *vouched for* yet: the gateway vouches
  for a connection once a request on it carried the token, the env server once a request head
  arrived. A new connection over the cap closes the oldest unvouched one, so a flood churns
  itself while a token holder's connection, vouched for at its first request, stays (behind
  Docker's port publishing every host client has the same address, so refusing new connections
  would lock the token holder out with the flood).
* **Malformed requests.** Bodies are parsed by :func:`loads_body`, which refuses nesting deeper
  than :data:`MAX_JSON_DEPTH` (the parser's own recursion would otherwise fail mid-handler);
  :func:`guard_middleware` turns what a handler still raises into one log line and a JSON reply
  (400 for undecodable text or too-deep data, 500 otherwise), never a traceback. Log lines
  are rate-limited (:class:`LineLog`), so a client cannot flood the log either.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
from aiohttp import web

if TYPE_CHECKING:
    from .fast_lane import FastLane, LaneConnection

#: JSON nested deeper than this is refused (400) before any handler sees it.
MAX_JSON_DEPTH = 100

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_TIMEOUT_BODY = b"the request was not sent in time\n"
_TIMEOUT_REPLY = (b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                  b"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(_TIMEOUT_BODY), _TIMEOUT_BODY))


class BadBody(ValueError):
    """A request body that is not usable JSON; the message says why (for a 400)."""


def loads_body(body: bytes | str) -> Any:
    """``json.loads`` that refuses non-UTF-8 text and nesting deeper than MAX_JSON_DEPTH."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise BadBody(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except UnicodeDecodeError:
        raise BadBody("the body is not UTF-8 text") from None
    except ValueError as exc:
        raise BadBody(f"the body is not JSON ({exc})") from None
    # (fewer opening brackets than the limit, even counting those in strings, cannot nest
    # past it: the walk is skipped for nearly every body)
    opening = body.count(b"[") + body.count(b"{") if isinstance(body, bytes) else \
        body.count("[") + body.count("{")
    if opening > MAX_JSON_DEPTH and _depth_over(value, MAX_JSON_DEPTH):
        raise BadBody(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (iterative: no recursion)."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def printable(text: str, limit: int = 200) -> str:
    """``text`` on one line, control and undecodable characters escaped, at most ``limit``."""
    out = "".join(c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF
                  else ascii(c)[1:-1] for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


class LineLog:
    """One-line warnings, at most ``burst`` per ``window`` seconds; then one line saying how
    many were left out, so a hostile client cannot fill the log."""

    def __init__(self, name: str, *, burst: int = 20, window: float = 60.0) -> None:
        self.logger = logging.getLogger(name)
        self.burst = burst
        self.window = window
        self._sent: collections.deque[float] = collections.deque()
        self.dropped = 0

    def warn(self, line: str) -> None:
        now = time.monotonic()
        while self._sent and now - self._sent[0] > self.window:
            self._sent.popleft()
        if len(self._sent) >= self.burst:
            self.dropped += 1
            return
        if self.dropped:
            self.logger.warning("%d more lines like these were left out", self.dropped)
            self.dropped = 0
        self._sent.append(now)
        self.logger.warning("%s", printable(line, 300))


class OneLine(logging.Filter):
    """Turns what aiohttp's server logs (a request it could not parse, with a traceback) into
    one rate-limited line of ``log``; the record itself is dropped."""

    def __init__(self, log: LineLog) -> None:
        super().__init__()
        self.log = log

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            detail = " ".join(str(error).split())
            text += f": {type(error).__name__}" + (f": {detail}" if detail else "")
        self.log.warn(text)
        return False


def server_logger(log: LineLog) -> logging.Logger:
    """The logger aiohttp's connection handler gets: every record becomes one line of ``log``."""
    logger = logging.getLogger(f"{log.logger.name}.http")
    if not any(isinstance(f, OneLine) and f.log is log for f in logger.filters):
        for old in [f for f in logger.filters if isinstance(f, OneLine)]:
            logger.removeFilter(old)
        logger.addFilter(OneLine(log))
    return logger


@attrs.frozen
class Limits:
    """Per-connection limits (seconds and counts); see the module docstring."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive_timeout: float = 30.0
    max_pending_per_client: int = 64
    max_pending: int = 512


class Guard(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the head deadline and the pending cap; the
    server's fast lane (:mod:`.fast_lane`), when it has one, reads the connection first."""

    def __init__(self, keeper: GuardedServer, inner: Any) -> None:
        self.keeper = keeper
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.client = "?"
        self.vouched = False
        self._payload: Any = None
        self._head_timer: asyncio.TimerHandle | None = None
        self.lane: LaneConnection | None = (keeper.lane.connection(self)
                                            if keeper.lane is not None else None)

    # -- asyncio.Protocol, delegated ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        peer = transport.get_extra_info("peername")
        self.client = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        self.keeper.opened(self)
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.lane is not None:
            self.lane.lost()
        self._stop_head_timer()
        self.keeper.closed(self)
        self.inner.connection_lost(exc)

    def eof_received(self) -> bool | None:
        result: bool | None = self.inner.eof_received()
        return result

    def pause_writing(self) -> None:
        if self.lane is not None:
            self.lane.pause_writing()
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.lane is not None:
            self.lane.resume_writing()
        self.inner.resume_writing()

    def data_received(self, data: bytes) -> None:
        if self.lane is not None:
            self.lane.data_received(data)
            return
        if self._payload is not None and not self._payload.is_eof():
            self.inner.data_received(data)  # body bytes: the middleware's read has a deadline
            return
        before = getattr(self.inner, "_request_count", None)
        self.inner.data_received(data)
        after = getattr(self.inner, "_request_count", None)
        if before is None or after is None:
            return  # an aiohttp without the counter: only the body deadline applies
        if after > before:  # a complete head (or several)
            self._stop_head_timer()
            messages = getattr(self.inner, "_messages", None)
            self._payload = messages[-1][1] if messages else None
            if not self.keeper.vouch_by_token:
                self.vouch()
        elif self._head_timer is None and self.transport is not None:
            loop = asyncio.get_running_loop()
            self._head_timer = loop.call_later(self.keeper.limits.header_timeout,
                                               self.head_too_slow)

    # -- ours --------------------------------------------------------------------------------
    def vouch(self) -> None:
        if not self.vouched:
            self.vouched = True
            self.keeper.vouched(self)

    def close(self, reply: bytes = b"") -> None:
        """Close the connection (first sending ``reply`` when given)."""
        if self.transport is not None and not self.transport.is_closing():
            if reply:
                with contextlib.suppress(Exception):
                    self.transport.write(reply)
            self.transport.close()

    def leave_lane(self, data: bytes) -> None:
        """The fast lane hands this connection to aiohttp for good, with the bytes it read."""
        self.lane = None
        if data:
            self.data_received(data)

    def head_too_slow(self) -> None:
        self._head_timer = None
        self.keeper.timed_out += 1
        self.close(_TIMEOUT_REPLY)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None


class GuardedServer:
    """The protocol factory handed to ``loop.create_server``: one :class:`Guard` per connection
    around aiohttp's own handler (``factory``, set when the site starts), and the books of
    unvouched connections per client."""

    def __init__(self, limits: Limits, *, vouch_by_token: bool,
                 lane: FastLane | None = None) -> None:
        self.factory: Callable[[], Any] | None = None
        #: Reads each connection before aiohttp while it may (:mod:`.fast_lane`); None: off.
        self.lane = lane
        self.limits = limits
        self.vouch_by_token = vouch_by_token
        self.pending: dict[str, dict[Guard, None]] = {}
        self.all_pending: dict[Guard, None] = {}
        self.by_transport: dict[Any, Guard] = {}
        self.open = 0
        self.evicted = 0
        self.timed_out = 0

    def __call__(self) -> Guard:
        assert self.factory is not None
        return Guard(self, self.factory())

    def opened(self, guard: Guard) -> None:
        self.open += 1
        self.by_transport[guard.transport] = guard
        mine = self.pending.setdefault(guard.client, {})
        if len(mine) >= self.limits.max_pending_per_client:
            self._evict(next(iter(mine)))
        if len(self.all_pending) >= self.limits.max_pending:
            self._evict(next(iter(self.all_pending)))
        mine[guard] = None
        self.all_pending[guard] = None

    def _evict(self, guard: Guard) -> None:
        self.evicted += 1
        self._forget_pending(guard)
        guard.close()

    def _forget_pending(self, guard: Guard) -> None:
        self.all_pending.pop(guard, None)
        mine = self.pending.get(guard.client)
        if mine is not None:
            mine.pop(guard, None)
            if not mine:
                del self.pending[guard.client]

    def vouched(self, guard: Guard) -> None:
        self._forget_pending(guard)

    def closed(self, guard: Guard) -> None:
        self.open -= 1
        self.by_transport.pop(guard.transport, None)
        self._forget_pending(guard)

    def vouch_for(self, request: web.Request) -> None:
        """Mark the connection ``request`` came on as trusted (it carried the token)."""
        guard = self.by_transport.get(request.transport)
        if guard is not None:
            guard.vouch()

    def stats(self) -> dict[str, int]:
        return {"open": self.open, "unvouched": len(self.all_pending),
                "evicted": self.evicted, "timed_out": self.timed_out}


GUARD_KEY = web.AppKey("agentenv_guard", GuardedServer)
LOG_KEY = web.AppKey("agentenv_line_log", LineLog)
HIDE_KEY: web.AppKey[Callable[[str], str]] = web.AppKey("agentenv_hide_path")


def vouch_for(request: web.Request) -> None:
    """Trust the connection ``request`` came on (a no-op when the app runs unguarded)."""
    keeper = request.app.get(GUARD_KEY)
    if keeper is not None:
        keeper.vouch_for(request)


def note_refused(request: web.Request, status: int, why: str) -> None:
    """One (rate-limited) log line for a request refused as malformed."""
    log = request.app.get(LOG_KEY)
    if log is not None:
        hide = request.app.get(HIDE_KEY)
        path = hide(request.path) if hide is not None else request.path
        log.warn(f"{status} {request.method} {path}: {why}")


def error_body(code: str, message: str) -> bytes:
    """The JSON body of a request the guard (or the fast lane) refuses or could not answer."""
    return json.dumps({"ok": False, "error": {"code": code, "message": message,
                                              "retryable": False, "applied": "no"}}).encode()


def _error_reply(status: int, code: str, message: str) -> web.Response:
    return web.Response(body=error_body(code, message), status=status,
                        content_type="application/json")


def guard_middleware(body_timeout: float, log: LineLog, *,
                     hide: Callable[[str], str] = lambda path: path) -> Any:
    """Read every body within ``body_timeout``; whatever a handler raises becomes one log line
    (``hide`` masks secrets in the path) and a JSON reply, never a traceback."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            if request.body_exists and not request.content.is_eof():
                # (a body already whole, the common case, needs no deadline, nor the task
                # wait_for would make)
                try:
                    await asyncio.wait_for(request.read(), body_timeout)
                except TimeoutError:
                    reply = _error_reply(408, "request_timeout",
                                         f"the body did not arrive within {body_timeout:g}s")
                    reply.force_close()
                    return reply
            return await handler(request)
        except web.HTTPException:
            raise
        except (BadBody, UnicodeError, RecursionError) as exc:
            log.warn(f"400 {request.method} {hide(request.path)}: {type(exc).__name__}: {exc}")
            message = str(exc) if isinstance(exc, BadBody) else (
                "the request holds text that cannot be decoded" if isinstance(exc, UnicodeError)
                else f"the request is nested too deeply (limit {MAX_JSON_DEPTH})")
            return _error_reply(400, "invalid_request", message)
        except Exception as exc:
            log.warn(f"500 {request.method} {hide(request.path)}: {type(exc).__name__}: {exc}")
            return _error_reply(500, "internal_error", f"{type(exc).__name__}: {exc}"[:300])

    return guard


def guard_app(app: web.Application, limits: Limits, *, vouch_by_token: bool,
              log: LineLog, hide: Callable[[str], str] = lambda path: path,
              lane: FastLane | None = None) -> None:
    """Give ``app`` (not started yet) the guard's middleware, first, and its connection books;
    :func:`start_guarded` then serves it. ``vouch_by_token``: connections are trusted once the
    app calls :func:`vouch_for` (the gateway's auth), else once a request head arrived.
    ``lane``: a :class:`~.fast_lane.FastLane` that reads connections first (the gateway's)."""
    app[GUARD_KEY] = GuardedServer(limits, vouch_by_token=vouch_by_token, lane=lane)
    app[LOG_KEY] = log
    app[HIDE_KEY] = hide
    app.middlewares.insert(0, guard_middleware(limits.body_timeout, log, hide=hide))


class GuardedSite(web.BaseSite):
    """A TCP site whose connections go through the app's :class:`GuardedServer`."""

    def __init__(self, runner: web.AppRunner, host: str, port: int) -> None:
        super().__init__(runner)
        self._host = host
        self._port = port
        self.keeper = runner.app[GUARD_KEY]

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.bound_port}"

    @property
    def bound_port(self) -> int:
        """The port actually bound (``port=0`` picks a free one)."""
        sockets = getattr(self._server, "sockets", None)
        return int(sockets[0].getsockname()[1]) if sockets else self._port

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self.keeper.factory = server
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self.keeper, self._host, self._port,
                                                reuse_address=True, backlog=1024)


async def start_guarded(app: web.Application, host: str, port: int, *,
                        handle_signals: bool = False) -> tuple[web.AppRunner, GuardedSite]:
    """Start ``app`` (given :func:`guard_app`) on ``host:port``; returns the runner (clean it
    up) and the site (``site.keeper.stats()``; the bound port in ``runner.addresses``)."""
    limits = app[GUARD_KEY].limits
    # lingering_time=0: a request answered before its body arrived (a 401, a 408) closes at
    # once; aiohttp would otherwise keep reading the rest for 10 s. Bodies a handler needs are
    # read by the guard's middleware anyway.
    runner = web.AppRunner(app, access_log=None, handle_signals=handle_signals,
                           keepalive_timeout=limits.keepalive_timeout, lingering_time=0,
                           logger=server_logger(app[LOG_KEY]))
    await runner.setup()
    site = GuardedSite(runner, host, port)
    await site.start()
    return runner, site


def run_guarded(app: web.Application, host: str, port: int) -> None:
    """Serve ``app`` until SIGINT/SIGTERM (what ``web.run_app`` does, with the guard)."""

    async def serve() -> None:
        runner, _site = await start_guarded(app, host, port, handle_signals=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt, web.GracefulExit):
        asyncio.run(serve())

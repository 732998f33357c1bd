"""The gateway's fast lane: ``POST /mcp`` answered straight from the connection.

Why: at 16 clients the gateway spent about 370 µs of CPU per forwarded ``tools/call`` and
most of it was not the call but aiohttp's request machinery around it (parser objects,
router, middlewares, a response object, a task per request). The lane reads the plain requests
MCP clients send, answers them through the same :meth:`McpEndpoint.answer_post
<agentenv_protocol.mcp_http.McpEndpoint.answer_post>` as aiohttp's route (so the two cannot
answer differently) and writes each reply with one ``write``.

It takes only what it can answer exactly as aiohttp would: ``POST`` over HTTP/1.1 to ``/mcp``
or ``/t/<token>/mcp`` carrying the right token, a ``Content-Length`` body of at most
:data:`MAX_BODY` bytes, and no ``Transfer-Encoding``, ``Expect`` or ``Upgrade``. Anything
else (another path, a wrong token, a head aiohttp might refuse) is handed to aiohttp with the
bytes read so far, and that connection stays with aiohttp from then on: its errors, limits and
log lines are aiohttp's and the guard's, as without the lane.

The guard (:mod:`.guard`) owns every connection and feeds the lane first while it may; the lane
keeps the guard's deadlines: a request must arrive within ``header_timeout`` of its first byte
(else 408, or, when only its body is late, aiohttp takes over with the body deadline), and an
idle connection closes after ``keepalive_timeout``.
"""

from __future__ import annotations

import asyncio
import hmac
import http
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from multidict import CIMultiDict

from .guard import LineLog, error_body
from .mcp_http import Refused, Reply

if TYPE_CHECKING:
    from .guard import Guard

#: Bodies larger than this go to aiohttp (a tool call's arguments are far smaller).
MAX_BODY = 256 * 1024
#: A head longer than this goes to aiohttp (which refuses heads over 8 KiB itself).
MAX_HEAD = 8 * 1024
#: Bytes buffered while a request is answered before reading from the client pauses.
MAX_BUFFERED = MAX_BODY + MAX_HEAD

Answer = Callable[[CIMultiDict[str], bytes, Refused], Awaitable[Reply]]

# Header lines aiohttp also accepts: a token name, optional blanks, visible text (or tabs).
_NAME = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_TEXT = rb"[\t\x20-\x7e\x80-\xff]*"
_FIELDS = re.compile(rb"(" + _NAME + rb"):[ \t]*(" + _TEXT + rb"?)[ \t]*\r\n")
_BLOCK = re.compile(rb"(?:" + _NAME + rb":" + _TEXT + rb"\r\n)*")
_NOT_OURS = object()
#: A request the lane takes: its headers, body, whether to keep the connection, bytes used.
Parsed = tuple[CIMultiDict[str], bytes, bool, int]
_REASONS = {status.value: status.phrase.encode() for status in http.HTTPStatus}
# Requests with these go to aiohttp (chunked bodies, 100-continue, protocol switches).
_REFUSED = re.compile(rb"\r\n(?:transfer-encoding|expect|upgrade):", re.IGNORECASE)


class FastLane:
    """What the lane serves: one endpoint's ``answer_post`` at ``/mcp``, behind ``token``
    (None: no token, as on env servers)."""

    def __init__(self, answer: Answer, *, token: str | None, log: LineLog,
                 hide: Callable[[str], str], max_body: int = MAX_BODY) -> None:
        self.answer = answer
        #: Larger bodies go to aiohttp (which refuses those over the app's own cap with 413).
        self.max_body = min(max_body, MAX_BODY)
        self.token = token.encode() if token else None
        self.log = log
        self.hide = hide
        self.served = 0  # requests answered by the lane (tests and stats read it)
        self.handed_over = 0  # connections handed to aiohttp
        self._date = (0, b"")

    def connection(self, guard: Guard) -> LaneConnection:
        """The lane's state for one new connection (its guard feeds it)."""
        return LaneConnection(self, guard)

    def date(self) -> bytes:
        now = int(time.time())
        if self._date[0] != now:
            self._date = (now, time.strftime("%a, %d %b %Y %H:%M:%S GMT",
                                             time.gmtime(now)).encode())
        return self._date[1]

    def parse(self, buf: bytearray) -> Parsed | object | None:
        """``(headers, body, keep_alive, consumed)`` for a whole request at the start of
        ``buf`` that the lane takes; None while more bytes are needed; ``_NOT_OURS`` for
        anything aiohttp must answer."""
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return None if len(buf) <= MAX_HEAD else _NOT_OURS
        if end > MAX_HEAD:
            return _NOT_OURS
        head = bytes(buf[:end + 2])  # each line with its CRLF
        line_end = head.find(b"\r\n")
        start = head[:line_end].split(b" ")
        if len(start) != 3 or start[0] != b"POST" or start[2] != b"HTTP/1.1":
            return _NOT_OURS
        target = start[1]
        if target == b"/mcp":
            by_path = False
        elif self.token is not None and target.startswith(b"/t/") and target.endswith(b"/mcp"):
            if not hmac.compare_digest(target[3:-4], self.token):
                return _NOT_OURS
            by_path = True
        else:
            return _NOT_OURS
        if _BLOCK.fullmatch(head, line_end + 2) is None:
            return _NOT_OURS  # some line is not a plain header field
        fields = _FIELDS.findall(head, line_end + 2)
        if _REFUSED.search(head, line_end) is not None:
            return _NOT_OURS
        headers: CIMultiDict[str] = CIMultiDict(
            [(name.decode("ascii"), value.decode("utf-8", "surrogateescape"))
             for name, value in fields])
        lengths = headers.getall("Content-Length", [])
        if len(lengths) != 1 or not lengths[0].isdigit() or not lengths[0].isascii():
            return _NOT_OURS
        length = int(lengths[0])
        if length > self.max_body:
            return _NOT_OURS
        connection = headers.get("Connection", "keep-alive").lower()
        if connection not in ("keep-alive", "close"):
            return _NOT_OURS
        if self.token is not None and not by_path:
            given = headers.get("Authorization", "")
            if given[:7].lower() != "bearer " or not hmac.compare_digest(
                    given[7:].strip().encode("utf-8", "surrogateescape"), self.token):
                return _NOT_OURS  # aiohttp's auth answers 401 and closes
        total = end + 4 + length
        if len(buf) < total:
            return None
        return headers, bytes(buf[end + 4:total]), connection == "keep-alive", total

    def encode(self, reply: Reply, keep_alive: bool) -> bytes:
        head = [b"HTTP/1.1 %d %s" % (reply.status, _REASONS.get(reply.status, b"Unknown")),
                b"Date: " + self.date(),
                b"Content-Length: %d" % len(reply.body)]
        if reply.content_type is not None:
            head.append(b"Content-Type: " + reply.content_type.encode())
        for name, value in reply.headers.items():
            head.append(f"{name}: {value}".encode())
        if not keep_alive:
            head.append(b"Connection: close")
        return b"\r\n".join(head) + b"\r\n\r\n" + reply.body


class LaneConnection:
    """One connection while the lane serves it (owned by its :class:`~.guard.Guard`)."""

    def __init__(self, lane: FastLane, guard: Guard) -> None:
        self.lane = lane
        self.guard = guard
        self.buf = bytearray()
        self.busy = False  # a request is being answered
        self.paused = False  # the client's socket is not read (too much buffered)
        self.write_paused = False
        self._request_timer: asyncio.TimerHandle | None = None
        #: One timer checks idleness, pushed on by ``_idle_since`` rather than re-armed per
        #: request (a timer per request cost more than the rest of the bookkeeping).
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_since = 0.0
        self.first = True

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._take()
        elif len(self.buf) > MAX_BUFFERED and not self.paused:
            self.paused = True
            self._transport().pause_reading()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if not self.busy and self.buf:
            self._take()

    def lost(self) -> None:
        self._stop_request_timer()
        self._stop_idle()

    def _transport(self) -> Any:
        return self.guard.transport

    def _take(self) -> None:
        """Answer the next whole request in the buffer, or wait for it, or hand over."""
        if self.write_paused or not self.buf:
            return
        parsed = self.lane.parse(self.buf)
        if parsed is None:
            if self._request_timer is None:
                loop = asyncio.get_running_loop()
                self._request_timer = loop.call_later(self.guard.keeper.limits.header_timeout,
                                                      self._too_slow)
            return
        if parsed is _NOT_OURS:
            self._hand_over()
            return
        assert isinstance(parsed, tuple)
        headers, body, keep_alive, consumed = cast(Parsed, parsed)
        self._stop_request_timer()
        del self.buf[:consumed]
        if self.paused and len(self.buf) <= MAX_BUFFERED:
            self.paused = False
            self._transport().resume_reading()
        if self.first:
            self.first = False
            self.guard.vouch()  # the request carried the token
            self.guard.inner.keep_alive(True)  # aiohttp's idle timer is the lane's now
        self.busy = True
        asyncio.get_running_loop().create_task(self._serve(headers, body, keep_alive))

    async def _serve(self, headers: CIMultiDict[str], body: bytes, keep_alive: bool) -> None:
        lane = self.lane

        def refused(status: int, why: str) -> None:
            lane.log.warn(f"{status} POST {lane.hide('/mcp')}: {why}")

        try:
            reply = await lane.answer(headers, body, refused)
        except Exception as exc:  # as the guard's middleware: one line and a JSON 500
            lane.log.warn(f"500 POST {lane.hide('/mcp')}: {type(exc).__name__}: {exc}")
            reply = Reply(500, error_body("internal_error", f"{type(exc).__name__}: {exc}"[:300]),
                          "application/json")
        lane.served += 1
        transport = self._transport()
        if transport is None or transport.is_closing():
            return
        transport.write(lane.encode(reply, keep_alive))
        if not keep_alive:
            transport.close()
            return
        self.busy = False
        if self.buf:
            self._take()
        elif self.guard.lane is self:
            loop = asyncio.get_running_loop()
            self._idle_since = loop.time()
            if self._idle_timer is None:
                self._idle_timer = loop.call_at(
                    self._idle_since + self.guard.keeper.limits.keepalive_timeout, self._idle)

    def _too_slow(self) -> None:
        self._request_timer = None
        if self.buf.find(b"\r\n\r\n") < 0:
            self.guard.head_too_slow()  # 408 and close, as without the lane
        else:
            self._hand_over()  # the body is late: aiohttp reads it under the body deadline

    def _idle(self) -> None:
        self._idle_timer = None
        if self.busy or self.buf:
            return  # a request is under way: re-armed when it is answered
        loop = asyncio.get_running_loop()
        close_at = self._idle_since + self.guard.keeper.limits.keepalive_timeout
        if loop.time() < close_at:
            self._idle_timer = loop.call_at(close_at, self._idle)
            return
        transport = self._transport()
        if transport is not None:
            transport.close()

    def _hand_over(self) -> None:
        self._stop_request_timer()
        self._stop_idle()
        self.lane.handed_over += 1
        data = bytes(self.buf)
        self.buf.clear()
        if self.paused:
            self.paused = False
            self._transport().resume_reading()
        self.guard.leave_lane(data)

    def _stop_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _stop_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

"""A lean HTTP/1.1 client for the gateway's calls to its env servers.

Why: a gateway spends most of its time forwarding ``tools/call`` to a child on a private
network, and aiohttp's client machinery (request and response objects, timers, traces, cookie
jar) cost more per call than the rest of the forward together. This pool keeps plain
keep-alive connections to one ``http://host:port`` and sends POSTs on them: a request is one
``write``, a reply is parsed from the bytes as they come (``Content-Length`` or chunked). It is
not a general client: no TLS, redirects, cookies or proxies; anything else goes through aiohttp.

Errors are the ones the callers already handle: :class:`TimeoutError` when no whole reply came
within the timeout, :class:`ConnectionError` (an :class:`OSError`) when the server could not be
reached (:class:`ConnectFailed`: nothing was sent) or closed the connection before answering.
A connection that closed while idle (the
server's keep-alive ran out) is noticed before it is used, and one idle for ``MAX_IDLE_SECONDS``
(below the servers' keep-alive of 30 s) is closed rather than used, so a request never races a
server closing its connection. A request is never sent twice: it may have been applied.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

#: Idle connections kept per pool; more are opened under load and closed when returned.
MAX_IDLE = 64
#: Idle connections older than this are closed instead of reused.
MAX_IDLE_SECONDS = 15.0
_HEAD_END = b"\r\n\r\n"


class ConnectFailed(ConnectionError):
    """No connection opened: the request was not sent."""


class Reply:
    """One HTTP reply: status, headers (names lower-cased) and the whole body."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


class _Connection(asyncio.Protocol):
    """One keep-alive connection: at most one request in flight (no pipelining)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self.idle_since = 0.0
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Reply] | None = None
        self._head: tuple[int, dict[str, str], int] | None = None  # status, headers, body start

    # -- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            if self._head is not None and self._head[1].get("content-length") is None \
                    and "chunked" not in self._head[1].get("transfer-encoding", ""):
                status, headers, start = self._head  # a body that ends with the connection
                waiter.set_result(Reply(status, headers, bytes(self._buffer[start:])))
            else:
                waiter.set_exception(ConnectionResetError(
                    "the server closed the connection before answering"))

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._waiter is not None and not self._waiter.done():
            self._parse()

    # -- requests ----------------------------------------------------------------------------
    def send(self, request: bytes, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Reply]:
        assert self.transport is not None and self._waiter is None
        self._buffer.clear()
        self._head = None
        self._waiter = loop.create_future()
        self.transport.write(request)
        return self._waiter

    def done(self) -> None:
        self._waiter = None

    def _parse(self) -> None:
        buffer = self._buffer
        if self._head is None:
            end = buffer.find(_HEAD_END)
            if end < 0:
                return
            lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
            try:
                status = int(lines[0].split(" ", 2)[1])
            except (IndexError, ValueError):
                self._fail(f"not an HTTP reply: {lines[0][:80]!r}")
                return
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if headers.get("connection", "").lower() == "close":
                self.reusable = False
            self._head = (status, headers, end + 4)
        status, headers, start = self._head
        assert self._waiter is not None
        length = headers.get("content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                self._fail(f"bad Content-Length {length!r}")
                return
            if len(buffer) - start >= size:
                self._waiter.set_result(Reply(status, headers, bytes(buffer[start:start + size])))
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            if not buffer.endswith(_HEAD_END):
                return  # a whole chunked message ends so: parse only then, not per packet
            try:
                body = _dechunk(buffer, start)
            except ConnectionError as exc:
                self._fail(str(exc))
                return
            if body is not None:
                self._waiter.set_result(Reply(status, headers, body))
            return
        if status in (204, 304) or 100 <= status < 200:
            self._waiter.set_result(Reply(status, headers, b""))
            return
        self.reusable = False  # the body runs to the connection's end (connection_lost)

    def _fail(self, why: str) -> None:
        self.reusable = False
        assert self._waiter is not None
        self._waiter.set_exception(ConnectionError(why))
        if self.transport is not None:
            self.transport.close()


def _dechunk(buffer: bytearray, start: int) -> bytes | None:
    """The body of a whole chunked message from ``start``, or None while incomplete."""
    out = bytearray()
    position = start
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size_text = bytes(buffer[position:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ConnectionError(f"bad chunk size {size_text[:20]!r}") from None
        chunk_start = line_end + 2
        if size == 0:
            # trailers (rare) end with an empty line
            return bytes(out) if buffer.find(_HEAD_END, line_end) >= 0 or \
                buffer[chunk_start:chunk_start + 2] == b"\r\n" else None
        if len(buffer) < chunk_start + size + 2:
            return None
        if buffer[chunk_start + size:chunk_start + size + 2] != b"\r\n":
            raise ConnectionError("a chunk does not end where its size says")
        out += buffer[chunk_start:chunk_start + size]
        position = chunk_start + size + 2


class Http1Pool:
    """Keep-alive connections to one ``http://host:port`` (see the module docstring)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"Http1Pool serves plain http:// URLs, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.authority = parts.netloc
        self._idle: list[_Connection] = []
        self._closed = False

    @staticmethod
    def usable_for(url: str) -> bool:
        return urlsplit(url).scheme == "http"

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(_Connection, self.host, self.port)
        return connection

    async def post(self, path: str, body: bytes, headers: Mapping[str, str], *,
                   timeout: float) -> Reply:
        """POST ``body`` to ``path``; the whole reply, or TimeoutError / ConnectionError."""
        head = [f"POST {path} HTTP/1.1\r\nHost: {self.authority}\r\n"
                f"Content-Length: {len(body)}\r\n"]
        head.extend(f"{name}: {value}\r\n" for name, value in headers.items())
        head.append("\r\n")
        request = "".join(head).encode("latin-1") + body
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        connection = None
        while self._idle:
            candidate = self._idle.pop()
            if not candidate.closed and loop.time() - candidate.idle_since < MAX_IDLE_SECONDS:
                connection = candidate
                break
            if candidate.transport is not None:
                candidate.transport.close()
        if connection is None:
            try:
                connection = await asyncio.wait_for(self._open(),
                                                    max(deadline - loop.time(), 0.001))
            except OSError as exc:
                raise ConnectFailed(f"cannot connect to {self.authority}: "
                                    f"{exc.strerror or exc}") from None
        waiter = connection.send(request, loop)
        timer = loop.call_later(max(deadline - loop.time(), 0.001), _expire, waiter)
        try:
            reply = await waiter
        except BaseException:
            connection.done()
            if connection.transport is not None:
                connection.transport.close()  # a half-read reply: never reused
            raise
        finally:
            timer.cancel()
        connection.done()
        connection.idle_since = loop.time()
        self._release(connection)
        return reply

    def _release(self, connection: _Connection) -> None:
        if connection.closed or not connection.reusable or self._closed \
                or len(self._idle) >= MAX_IDLE:
            if connection.transport is not None:
                connection.transport.close()
            return
        self._idle.append(connection)

    def close(self) -> None:
        self._closed = True
        for connection in self._idle:
            if connection.transport is not None:
                with contextlib.suppress(Exception):
                    connection.transport.close()
        self._idle.clear()


def _expire(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())

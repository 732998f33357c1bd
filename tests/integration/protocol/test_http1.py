"""The gateway's lean HTTP/1.1 pool (agentenv_protocol.http1) against real sockets.

Each test serves scripted replies from a raw asyncio server, so the shapes a child may answer
with (length, chunked, close-delimited) and the ways it may fail are all exercised on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from agentenv_protocol.http1 import Http1Pool

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.decode("latin-1").split("\r\n"):
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    return await reader.readexactly(length)


async def _serve(script: Script) -> tuple[asyncio.Server, str, list[int]]:
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await script(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", connections


def _run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 20))  # type: ignore[arg-type]


def test_length_replies_reuse_one_connection() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await _read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    async def main() -> None:
        server, url, connections = await _serve(echo)
        pool = Http1Pool(url)
        for i in range(5):
            reply = await pool.post("/mcp", b'{"n": %d}' % i, {"X-A": "1"}, timeout=5)
            assert (reply.status, reply.body) == (200, b'{"n": %d}' % i)
            assert reply.header("Content-Type") == "application/json"
        assert len(connections) == 1  # kept alive
        pool.close()
        server.close()

    _run(main())


def test_chunked_and_close_delimited_bodies() -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"5\r\nevent\r\n", b"7;x=1\r\n: data\n\r\n", b"0\r\n\r\n"):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)  # arrives in pieces
        await _read_request(reader)  # the connection is reused for the next request
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()

    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        await writer.drain()

    async def main() -> None:
        server, url, connections = await _serve(chunked)
        pool = Http1Pool(url)
        reply = await pool.post("/", b"{}", {}, timeout=5)
        assert reply.body == b"event: data\n"
        assert (await pool.post("/", b"{}", {}, timeout=5)).status == 204
        assert len(connections) == 1
        server.close()
        server, url, connections = await _serve(until_close)
        pool = Http1Pool(url)
        assert (await pool.post("/", b"{}", {}, timeout=5)).body == b"all of it"
        assert (await pool.post("/", b"{}", {}, timeout=5)).body == b"all of it"
        assert len(connections) == 2  # "Connection: close" is honoured
        server.close()

    _run(main())


def test_failures_are_timeout_or_connection_errors_and_never_resent() -> None:
    seen: list[bytes] = []

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await _read_request(reader))  # read it, then close without answering

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
        await writer.drain()
        await asyncio.sleep(5)

    async def main() -> None:
        server, url, _ = await _serve(hang_up)
        with pytest.raises(ConnectionError, match="closed the connection before answering"):
            await Http1Pool(url).post("/", b"call", {}, timeout=5)
        assert seen == [b"call"]  # sent once: it may have been applied
        server.close()
        server, url, _ = await _serve(stall)
        pool = Http1Pool(url)
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TimeoutError):
            await pool.post("/", b"{}", {}, timeout=0.3)
        assert loop.time() - start < 1.5
        assert not pool._idle  # a half-read connection is not reused
        server.close()
        await server.wait_closed()
        with pytest.raises(ConnectionError, match="cannot connect"):
            await Http1Pool(url).post("/", b"{}", {}, timeout=2)

    _run(main())


def test_idle_connection_closed_by_the_server_is_not_used() -> None:
    async def one_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()  # then the handler returns: the server closes the idle connection

    async def main() -> None:
        server, url, connections = await _serve(one_reply)
        pool = Http1Pool(url)
        assert (await pool.post("/", b"{}", {}, timeout=5)).body == b"ok"
        await asyncio.sleep(0.1)
        assert (await pool.post("/", b"{}", {}, timeout=5)).body == b"ok"
        assert len(connections) == 2
        server.close()

    _run(main())


def test_only_plain_http() -> None:
    assert Http1Pool.usable_for("http://env:18765/mcp")
    assert not Http1Pool.usable_for("https://env/mcp")
    with pytest.raises(ValueError, match="plain http"):
        Http1Pool("https://env/mcp")

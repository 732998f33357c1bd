"""A byte-for-byte TCP proxy on asyncio: ``python bench/tcp_proxy.py PORT TARGET_PORT``.

The floor ``bench.protocol`` sets beside the gateway: one connection to the target per client
connection, every byte passed on as it comes, nothing parsed. What it spends per call is what
any asyncio gateway spends on the sockets alone (reads, writes, the event loop's wake-ups).
A bench baseline, not a product part.
"""

from __future__ import annotations

import asyncio
import sys

HOST = "127.0.0.1"


class _Upstream(asyncio.Protocol):
    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.upstream: asyncio.Transport | None = None
        self.pending: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        assert isinstance(self.transport, asyncio.Transport)
        try:
            upstream, _ = await asyncio.get_running_loop().create_connection(
                lambda: _Upstream(self.transport), HOST, self.target_port)
        except OSError:
            self.transport.close()
            return
        self.upstream = upstream
        for data in self.pending:
            upstream.write(data)
        self.pending.clear()

    def data_received(self, data: bytes) -> None:
        if self.upstream is None:
            self.pending.append(data)
        else:
            self.upstream.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def main(port: int, target_port: int) -> None:
    server = await asyncio.get_running_loop().create_server(
        lambda: _Client(target_port), HOST, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))

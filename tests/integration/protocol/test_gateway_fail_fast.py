"""Issue 19, point 2: a forwarded call fails within a second when its env server is gone.

A killed container sends no reset: the gateway's open connection just stops answering. Here a
relay between the gateway and a real env server plays that container: ``vanish()`` stops
accepting connections and stops passing bytes, holding the open ones silently, as a vanished
network namespace does. A child that is alive but slow must still be waited for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from agentenv_protocol import AgentEnvEnvironment, McpClient, environment_card, tool
from agentenv_protocol.testing import serve_env, serve_gateway


@environment_card(name="sleepy")
class SleepyEnv(AgentEnvEnvironment):
    @tool(name="nap")
    async def nap(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "rested"


class Relay:
    """A TCP relay to ``port`` that can vanish without sending a reset."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.vanished = False
        self.server: asyncio.Server | None = None
        self.held: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.held += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while chunk := await src.read(65536):
                if self.vanished:
                    return  # swallowed: no answer, no reset
                dst.write(chunk)
                await dst.drain()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer),
                             return_exceptions=True)

    def vanish(self) -> None:
        self.vanished = True
        assert self.server is not None
        self.server.close()  # new connections are refused

    async def close(self) -> None:
        for writer in self.held:
            writer.close()
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def relayed() -> AsyncIterator[tuple[Relay, str]]:
    async with serve_env(SleepyEnv()) as env:
        relay = Relay(env.port)
        url = await relay.start()
        try:
            yield relay, url
        finally:
            await relay.close()


async def test_a_call_to_a_vanished_env_fails_within_a_second_naming_it(
        relayed: tuple[Relay, str]) -> None:
    relay, url = relayed
    async with serve_gateway([url], call_timeout=30) as gw, McpClient(gw.mcp_url) as client:
        assert (await client.call_tool("nap", {"seconds": 0})).text == "rested"
        in_flight = asyncio.ensure_future(client.call_tool("nap", {"seconds": 4}))
        await asyncio.sleep(0.3)
        relay.vanish()
        started = time.monotonic()
        result = await in_flight
        took = time.monotonic() - started
        assert result.is_error and took < 1.0, (took, result.text)
        assert "env_unavailable: environment 'sleepy' failed tool 'nap': environment " \
               "'sleepy' is gone" in result.text
        assert result.structured_content["applied"] == "unknown"  # it may have run before it died
        started = time.monotonic()  # the next call: at once
        again = await client.call_tool("nap", {"seconds": 0})
        assert again.is_error and "is gone" in again.text
        assert time.monotonic() - started < 1.0


async def test_a_slow_env_that_is_alive_is_waited_for(relayed: tuple[Relay, str]) -> None:
    _, url = relayed
    async with serve_gateway([url], call_timeout=30) as gw, McpClient(gw.mcp_url) as client:
        started = time.monotonic()
        assert (await client.call_tool("nap", {"seconds": 1.5})).text == "rested"
        assert time.monotonic() - started >= 1.5


async def test_an_env_no_connection_reaches_fails_at_once_as_gone_and_unsent(
        relayed: tuple[Relay, str]) -> None:
    """No call in flight: the gateway's next call needs a new connection, which is refused
    (a container gone, its name no longer resolving): the env is named gone, and the call is
    known not to have been applied."""
    relay, url = relayed
    async with serve_gateway([url], call_timeout=30) as gw, McpClient(gw.mcp_url) as client:
        assert (await client.call_tool("nap", {"seconds": 0})).text == "rested"
        relay.vanish()
        await relay.close()  # the idle kept-alive connection closes too
        await asyncio.sleep(0.1)
        started = time.monotonic()
        result = await client.call_tool("nap", {"seconds": 0})
        assert time.monotonic() - started < 1.0
        assert result.is_error and "environment 'sleepy' failed tool 'nap': environment " \
            "'sleepy' is gone" in result.text, result.text
        assert result.structured_content["applied"] == "no"

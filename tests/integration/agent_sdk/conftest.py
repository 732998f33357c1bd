"""Fixtures for the A2A agent SDK tests: real agent servers on 127.0.0.1, free ports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from agent_sdk_helpers import EchoAgent, Rpc, Served, StreamAgent

from agentenv_protocol.agent import create_app
from agentenv_protocol.testing import serve_app


@pytest.fixture
async def echo() -> AsyncIterator[Served]:
    agent = EchoAgent()
    async with serve_app(create_app(agent, cancel_grace=5)) as server:
        yield Served(server, agent)


@pytest.fixture
async def streamer() -> AsyncIterator[Served]:
    agent = StreamAgent()
    async with serve_app(create_app(agent)) as server:
        yield Served(server, agent)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session


@pytest.fixture
def rpc(http: aiohttp.ClientSession, echo: Served) -> Rpc:
    """Raw JSON-RPC against the echo agent."""
    return Rpc(http, echo.url)

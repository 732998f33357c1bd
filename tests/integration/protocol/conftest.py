"""Fixtures for the protocol integration tests: real servers on 127.0.0.1, free ports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from reference_style_env import EchoEnv

from agentenv_protocol.testing import RunningServer, serve_env, serve_gateway


@pytest.fixture
async def echo_server() -> AsyncIterator[RunningServer]:
    async with serve_env(EchoEnv()) as server:
        yield server


@pytest.fixture
async def echo_gateway(echo_server: RunningServer) -> AsyncIterator[RunningServer]:
    async with serve_gateway([echo_server.url], call_timeout=5, ready_timeout=10) as gateway:
        yield gateway

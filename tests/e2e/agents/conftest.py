"""Fixtures of the agents' CLI tests: the model-endpoint test double, served on this host."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from fake_models import ToolCallingFake
from run_children import network_gateway


@pytest.fixture
def upstream(docker_client: Any) -> Iterator[tuple[ToolCallingFake, str]]:
    """The fake on all interfaces of this host, and its URL as containers reach it (the
    default bridge's gateway address)."""
    fake = ToolCallingFake()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.complete)
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "0.0.0.0", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    host = network_gateway(docker_client.networks.get("bridge"))
    try:
        yield fake, f"http://{host}:{port}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)

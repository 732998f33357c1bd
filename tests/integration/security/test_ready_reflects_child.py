"""``/ready`` reflects the env server behind the gateway: frozen or killed, it is not ready.

The hostile test that found it: ``{"ready": true}`` stayed after the env container was killed
or frozen. Here the env container of a real deployment is paused (frozen), unpaused, then
killed, and the gateway's ``/ready`` is read each time.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest

pytestmark = pytest.mark.docker


async def _ready(env: Any) -> tuple[int, dict[str, Any], float]:
    start = time.monotonic()
    async with aiohttp.ClientSession() as http, http.get(
            f"{env.capability_url}/ready", timeout=aiohttp.ClientTimeout(total=10)) as resp:
        return resp.status, await resp.json(), time.monotonic() - start


async def test_ready_follows_a_frozen_then_killed_env_server(
    deployed_vault: Any, docker_client: Any,
) -> None:
    env = deployed_vault
    container = docker_client.containers.get(env.sandbox.container_name("env"))
    assert (await _ready(env))[:2] == (200, {"ready": True})

    container.pause()
    try:
        status, body, seconds = await _ready(env)
        assert status == 503 and body["ready"] is False, body
        assert "frozen" in " ".join(body["down"].values()), body
        assert seconds < 4, seconds  # the probe's 2 s, not the call timeout
        print(f"frozen env: /ready 503 in {seconds:.2f}s: {body['down']}")
    finally:
        container.unpause()
    assert (await _ready(env))[:2] == (200, {"ready": True})

    container.kill()
    status, body, seconds = await _ready(env)
    assert status == 503 and body["ready"] is False, body
    assert list(body["down"]) == ["vault"], body  # refused, or no answer from its old address
    assert seconds < 4, seconds
    print(f"killed env: /ready 503 in {seconds:.2f}s: {body['down']}")

"""Fixtures for the tensorlake plugin: the fake Tensorlake API (in a thread) on real Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the fake lives next to the tests

from fake_tensorlake import API_KEY, BASE_IMAGE, FakeTensorlake


def docker_or_skip() -> Any:
    """The engine client with the base image present; else skip (fail under CI)."""
    try:
        from agentenv_docker_env.engine import daemon_problem, docker_client
    except ImportError as exc:
        problem: str | None = f"docker_env is not installed: {exc}"
    else:
        problem = daemon_problem()
    if problem is None:
        client = docker_client()
        try:
            client.images.get(BASE_IMAGE)
        except Exception:
            problem = f"no {BASE_IMAGE} image (run `bash .ci/docker.sh` to build it offline)"
        else:
            return client
    message = f"no usable Docker: {problem} (run `bash .ci/docker.sh`)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message}; Docker tests never skip under CI=true")
    pytest.skip(message)


@pytest.fixture(autouse=True)
def state_root(tmp_path: Path) -> Iterator[Path]:
    """A private state root and config per test (stores, wheel caches, providers)."""
    from agent_env import config
    from agent_env.stores import reset_stores
    from agent_env.tasks.sandboxes import forget_providers

    root = tmp_path / "state"
    old = os.environ.get("AGENT_ENV_STATE_DIR")
    os.environ["AGENT_ENV_STATE_DIR"] = str(root)
    config.reset()
    reset_stores()
    forget_providers()
    yield root
    if old is None:
        os.environ.pop("AGENT_ENV_STATE_DIR", None)
    else:
        os.environ["AGENT_ENV_STATE_DIR"] = old
    config.reset()
    reset_stores()
    forget_providers()


@pytest.fixture
def wildcard_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    """``<port>-<id>.localhost`` resolves to 127.0.0.1, as the cloud's wildcard DNS would."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host  # anyio passes bytes
        if isinstance(name, str) and name.endswith(".localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def fake_tensorlake(wildcard_localhost: None) -> Iterator[FakeTensorlake]:
    """The fake service on 127.0.0.1, served from its own thread and event loop."""
    client = docker_or_skip()
    fake = FakeTensorlake(
        client, api_key=API_KEY,
        images={"agentenv-dind-host-v1": BASE_IMAGE, BASE_IMAGE: BASE_IMAGE,
                "plain-python": BASE_IMAGE},
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(fake.start(), loop).result(30)
    yield fake
    asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(120)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)

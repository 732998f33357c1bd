"""Fixtures for the tenki plugin: the real SDK on a fake Tenki transport backed by Docker.

Docker tests never skip under ``CI=true``: a missing daemon or base image fails there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the fake lives next to the tests

from fake_tenki import BASE_IMAGE, FakeTenkiRPC


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
def fake_tenki(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTenkiRPC]:
    """The fake service; the SDK's data-plane transport is the same fake."""
    import tenki_sandbox.sandbox

    fake = FakeTenkiRPC(docker_or_skip())
    monkeypatch.setattr(tenki_sandbox.sandbox, "GrpcDataPlaneRPC",
                        lambda endpoint, credentials: fake)
    yield fake
    fake.remove_all()

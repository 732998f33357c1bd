"""Fixtures every test tier shares.

``docker_client`` is the one gate for Docker tests: a real daemon with the ``python:3.11-slim``
base image, else a skip with the reason — and a failure under ``CI=true``, where Docker tests
never skip (``skip_or_fail`` is that rule for other installable needs). ``state_root`` gives a
test its own state root (stores, caches, providers), ``build_state_root`` one that shares the
session's protocol wheel cache; ``run_id`` a unique ``agentenv.run`` label whose containers and
networks are removed after the test, and ``leftovers`` lists them; ``wildcard_localhost``
resolves a fake cloud's public port hosts (``<port>-<id>.localhost``) to 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

BASE_IMAGE = "python:3.11-slim"


def _skip_or_fail(message: str) -> NoReturn:
    """Skip with ``message``; under ``CI=true`` fail instead: CI installs what these tests need,
    so a missing piece there is a broken set-up, not a reason to report nothing."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message}; these tests never skip under CI=true")
    pytest.skip(message)


@pytest.fixture(scope="session")
def skip_or_fail() -> Callable[[str], NoReturn]:
    """``skip_or_fail(message)``: for a need CI installs (an SDK, a binary); not for a host
    capability CI machines lack (working KVM, a live cloud account), which is a plain skip."""
    return _skip_or_fail


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """The engine client with the base image present; skips (fails under CI) otherwise."""
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
    _skip_or_fail(f"no usable Docker: {problem} (run `bash .ci/docker.sh`)")


@pytest.fixture
def state_root(tmp_path: Path) -> Iterator[Path]:
    """A private state root for this test; config, stores and providers are forgotten around it."""
    from agent_env import runtime

    root = tmp_path / "state"
    old = os.environ.get("AGENT_ENV_STATE_DIR")
    os.environ["AGENT_ENV_STATE_DIR"] = str(root)
    runtime.reset()
    yield root
    if old is None:
        os.environ.pop("AGENT_ENV_STATE_DIR", None)
    else:
        os.environ["AGENT_ENV_STATE_DIR"] = old
    runtime.reset()


def _labelled(client: Any, run_id: str) -> tuple[list[Any], list[Any]]:
    label = {"label": f"agentenv.run={run_id}"}
    return (client.containers.list(all=True, filters=label),
            client.networks.list(filters=label))


@pytest.fixture
def run_id(docker_client: Any) -> Iterator[str]:
    """A unique ``agentenv.run`` label; whatever still carries it after the test is removed."""
    value = f"test-{uuid.uuid4().hex[:10]}"
    yield value
    containers, networks = _labelled(docker_client, value)
    for container in containers:
        container.remove(force=True)
    for network in networks:
        network.remove()


@pytest.fixture
def leftovers(docker_client: Any, run_id: str) -> Callable[[], list[str]]:
    """Names of the containers and networks still labelled with the test's ``run_id``."""

    def names() -> list[str]:
        containers, networks = _labelled(docker_client, run_id)
        return [c.name for c in containers] + [n.name for n in networks]

    return names


@pytest.fixture(scope="session")
def _session_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("protocol-wheels")


@pytest.fixture
def build_state_root(state_root: Path, _session_wheels: Path) -> Path:
    """``state_root`` whose protocol wheel cache is shared by the session: tests that build
    images pay the hermetic wheel build (about 2 s) once, not once per test."""
    images = state_root / "images"
    images.mkdir(parents=True, mode=0o700)
    (images / "wheels").symlink_to(_session_wheels, target_is_directory=True)
    return state_root


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

"""One place that opens the Docker Engine API, so errors about a missing daemon read the same."""

from __future__ import annotations

import functools
from typing import Any

from agent_env.errors import UserError


class DockerUnavailable(UserError):
    """No Docker daemon answers; the message says how to start one."""


@functools.cache
def _cached_client(base_url: str | None) -> Any:
    import docker

    if base_url:
        return docker.DockerClient(base_url=base_url, timeout=300)
    return docker.from_env(timeout=300)


def docker_client(base_url: str | None = None) -> Any:
    """A ``docker.DockerClient`` (shared per address); raises :class:`DockerUnavailable`."""
    try:
        client = _cached_client(base_url)
        client.ping()
    except Exception as exc:
        _cached_client.cache_clear()
        raise DockerUnavailable(
            f"cannot reach the Docker daemon ({type(exc).__name__}: {exc})",
            notes=["start it with `bash .ci/docker.sh` (installs and starts dockerd if needed)"],
        ) from None
    return client


def daemon_problem(base_url: str | None = None) -> str | None:
    """None when a daemon answers, else a one-line reason (for ``availability``)."""
    try:
        docker_client(base_url)
    except DockerUnavailable as exc:
        return exc.message
    except ImportError:
        return "the `docker` Python package is not installed (pip install docker)"
    return None

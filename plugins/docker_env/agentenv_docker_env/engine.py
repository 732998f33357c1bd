"""One place that opens the Docker Engine API, so errors about a missing daemon read the same."""

from __future__ import annotations

import functools
from typing import Any

from agent_env.api import UserError, cause


class DockerUnavailable(UserError):
    """No Docker daemon answers; the message says how to start one."""


@functools.cache
def _cached_client(base_url: str | None) -> Any:
    """Made and pinged once per address (a failure is not cached, so the next call retries)."""
    import docker

    if base_url:
        client = docker.DockerClient(base_url=base_url, timeout=300)
    else:
        client = docker.from_env(timeout=300)
    client.ping()
    return client


def _unavailable(exc: Exception) -> DockerUnavailable:
    return DockerUnavailable(
        f"cannot reach the Docker daemon ({cause(exc)})",
        notes=["start it with `bash .ci/docker.sh` (installs and starts dockerd if needed)"],
    )


def docker_client(base_url: str | None = None) -> Any:
    """A ``docker.DockerClient`` (shared per address); raises :class:`DockerUnavailable`.

    Pinged when first made only: a daemon that goes away later fails the call that needs it,
    and every property access paying a round trip showed up in the deploy profile.
    """
    try:
        return _cached_client(base_url)
    except ImportError:
        raise
    except Exception as exc:
        raise _unavailable(exc) from None


def daemon_problem(base_url: str | None = None) -> str | None:
    """None when a daemon answers now, else a one-line reason (for ``availability``)."""
    try:
        docker_client(base_url).ping()
    except DockerUnavailable as exc:
        return exc.message
    except ImportError:
        return "the `docker` Python package is not installed (pip install docker)"
    except Exception as exc:
        _cached_client.cache_clear()
        return _unavailable(exc).message
    return None

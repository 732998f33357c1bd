"""Image builds on the Docker Engine, named by content so unchanged sources never rebuild.

The plan (what is sent, the content-hash tag ``agentenv/<slug>:<digest16>``, the hermetic
protocol wheel) is the core's, ``agent_env.api.plan_build``, shared with every provider that
builds. What is left here needs the engine.

Builds go through the Engine API (``docker`` SDK, legacy builder; no buildx or compose needed).
Every output line goes to the ``progress`` callback as it arrives and is kept, so a failed build
raises :class:`ImageBuildError` carrying the last lines. A build that outlasts
``build_timeout`` (docker_env's setting, :mod:`.settings`) raises :class:`BuildTimedOut`.

Base images a registry cannot give: a ``FROM`` naming a Docker Official Image through a registry
or by digest (the reference's bundles say
``FROM public.ecr.aws/docker/library/python:3.11-slim@sha256:...``) that is not on the engine is
pulled first; when the registry does not answer (machines without Docker Hub or ECR Public) and
the engine has the same image by its plain name and tag (``python:3.11-slim``), the build uses
that one, says so in the progress, and the substitution is part of the build digest (so the tag
differs from a build on the exact base).
"""

from __future__ import annotations

import collections
import contextlib
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from agent_env.api import (
    BUILD_DIGEST_LABEL,
    PROTOCOL_DISTRIBUTION,
    BuildPlan,
    SandboxError,
    UserError,
    from_refs,
    official_name,
    plan_build,
    write_build_tar,
)
from agentenv_docker_env.engine import docker_client
from agentenv_docker_env.settings import TABLE, docker_env_settings

__all__ = [
    "BuildStopped", "BuildTimedOut", "BuiltImage", "ImageBuildError", "build_image",
    "resolve_bases",
]

KEEP_LINES = 2000

Progress = Callable[[str], None]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: Build output kept in the log but not shown as progress (the engine's bookkeeping).
_QUIET_LINES = (" ---> ", "Removing intermediate container")
#: The classic builder's line naming the image a step committed.
_LAYER = re.compile(r"^ ---> ([0-9a-f]{12,64})\s*$")


class BuildStopped(SandboxError):
    """The caller gave up on a build (Ctrl-C); the engine drops it when the client goes."""


class BuildTimedOut(SandboxError, UserError):
    """A build outlasted ``build_timeout``; one line saying which setting to raise."""

    def __init__(self, tag: str, seconds: float) -> None:
        super().__init__(
            f"building {tag} took longer than build_timeout = {seconds:g} seconds and was "
            f"stopped; raise build_timeout in {TABLE} of .agentenv/config.toml"
        )
        self.seconds = seconds


class ImageBuildError(SandboxError, UserError):
    """A build failed; ``log_tail`` holds its last output lines (also shown as notes)."""

    def __init__(self, message: str, log_tail: list[str]) -> None:
        UserError.__init__(self, message, notes=log_tail)
        self.log_tail = log_tail


@attrs.frozen
class BuiltImage:
    """The outcome of :func:`build_image`; ``reused`` is True when no build was needed."""

    tag: str
    image_id: str
    source_digest: str
    build_digest: str
    reused: bool
    seconds: float
    log: tuple[str, ...] = attrs.field(default=(), repr=False)


def build_image(
    context: str | Path,
    *,
    name: str | None = None,
    tag: str | None = None,
    labels: Mapping[str, str] | None = None,
    dockerfile: str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    hermetic_build: bool = True,
    progress: Progress | None = None,
    force: bool = False,
    client: Any = None,
    tail: int = 40,
    stop: threading.Event | None = None,
    timeout: float | None = None,
) -> BuiltImage:
    """Build ``context`` into ``agentenv/<slug>:<digest16>`` (or ``tag``), or reuse it.

    ``name`` picks the slug (default: the folder name). With ``hermetic_build`` the image gets
    this repository's protocol wheel (see :mod:`agent_env.images.hermetic`). ``progress``
    receives every output line. Raises :class:`ImageBuildError` with the last ``tail`` lines
    when the build fails. ``stop`` set (the caller was cancelled) abandons the build at once (its
    connection to the engine is shut, see :func:`_interrupt_on`), not at its next
    output line: the engine cancels a build whose client has gone. ``timeout`` (default: the
    ``build_timeout`` setting) bounds the whole call in seconds: past it, the build is given up
    (:class:`BuildTimedOut`) at its next output line, or when the engine has been silent
    that long.
    """
    started = time.monotonic()
    if timeout is None:
        timeout = docker_env_settings().build_timeout
    client = client or docker_client()
    say = progress or (lambda line: None)
    bases = resolve_bases(client, Path(context) / dockerfile, say)
    plan = plan_build(
        context, name=name, tag=tag, dockerfile=dockerfile, build_args=build_args,
        hermetic_build=hermetic_build, bases=bases,
    )
    for note in plan.notes:
        say(note)
    with _building(plan.tag, stop):
        return _build_or_reuse(client, plan, context, dockerfile, labels, build_args, say,
                               tail, stop, timeout, started, force)


#: One lock per image tag this process builds: two tasks of a run that build the same sources
#: at once (a cold cache) wait for one build, then find its image, instead of building twice.
_TAG_LOCKS: dict[str, threading.Lock] = {}
_TAG_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def _building(tag: str, stop: threading.Event | None) -> Iterator[None]:
    with _TAG_LOCKS_GUARD:
        lock = _TAG_LOCKS.setdefault(tag, threading.Lock())
    while not lock.acquire(timeout=0.1):
        if stop is not None and stop.is_set():
            raise BuildStopped(f"waiting for another build of {tag} was stopped")
    try:
        yield
    finally:
        lock.release()


def _build_or_reuse(client: Any, plan: Any, context: str | Path, dockerfile: str,
                    labels: Mapping[str, str] | None, build_args: Mapping[str, str] | None,
                    say: Progress, tail: int, stop: threading.Event | None,
                    timeout: float, started: float, force: bool) -> BuiltImage:
    if not force:
        existing = _existing_image(client, plan.tag)
        labels_now = (existing.labels or {}) if existing is not None else {}
        built_from = labels_now.get(BUILD_DIGEST_LABEL)
        if existing is not None and built_from == plan.build_digest:
            say(f"image {plan.tag} (cached)")
            return BuiltImage(
                plan.tag, existing.id, plan.source_digest, plan.build_digest, True,
                time.monotonic() - started,
            )
    say(f"building image {plan.tag}")
    all_labels = {**(labels or {}), **plan.labels}
    deadline = _Deadline(started, timeout, plan.tag)
    layers: list[str] = []
    try:
        image_id, log = _run_build(client, plan, all_labels, build_args, say, tail, stop,
                                   deadline, layers)
    except ImageBuildError as exc:
        _drop_partial_layers(client, layers)
        raise _unpulled(client, Path(context) / dockerfile, exc) from None
    except BaseException:
        _drop_partial_layers(client, layers)
        raise
    took = time.monotonic() - started
    say(f"image {plan.tag} built in {took:.1f}s")
    return BuiltImage(
        plan.tag, image_id, plan.source_digest, plan.build_digest, False, took, tuple(log),
    )


def _drop_partial_layers(client: Any, layers: list[str]) -> None:
    """Remove what a build that did not finish committed (its steps' images: untagged, about
    the size of what they installed), so an interrupted or failed build leaves no dangling
    image. Removing the last one removes its untagged parents with it; the engine refuses an
    image another build or image uses (a cache hit), and that refusal is kept."""
    if not layers:
        return
    with contextlib.suppress(Exception):  # cleanup of a build that already failed
        client.api.remove_image(layers[-1], noprune=False)


def _existing_image(client: Any, tag: str) -> Any:
    import docker.errors

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


@attrs.frozen
class _Deadline:
    """When a build must be over: checked at every output line and bounding each silent read."""

    started: float
    seconds: float
    tag: str

    def left(self) -> float:
        return self.started + self.seconds - time.monotonic()

    def check(self) -> None:
        if self.left() <= 0:
            raise BuildTimedOut(self.tag, self.seconds)


def _run_build(
    client: Any,
    plan: BuildPlan,
    labels: dict[str, str],
    build_args: Mapping[str, str] | None,
    say: Progress,
    tail: int,
    stop: threading.Event | None,
    deadline: _Deadline,
    layers: list[str],
) -> tuple[str, list[str]]:
    """Run the build, streaming its lines to ``say``; ``layers`` collects the id of each
    step's image as the engine reports it (`` ---> <id>``), for cleanup if it does not
    finish."""
    import docker.errors

    log: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
    image_id: str | None = None
    error: str | None = None
    watching: list[threading.Event | None] = []
    with tempfile.TemporaryFile() as tar, contextlib.ExitStack() as cleanup:
        cleanup.callback(lambda: [done.set() for done in watching if done is not None])
        write_build_tar(plan, tar)
        tar.seek(0)
        deadline.check()
        stream: Any = None
        try:
            # ``timeout`` is the engine connection's read timeout: a step silent for the rest
            # of the time (``RUN sleep``) ends the read, and so the build, at the deadline.
            stream = client.api.build(
                fileobj=tar, custom_context=True, tag=plan.tag, labels=labels,
                dockerfile=plan.dockerfile, buildargs=dict(build_args or {}), decode=True,
                rm=True, forcerm=True, pull=False, timeout=max(deadline.left(), 0.1),
            )
            watching.append(_interrupt_on(stop, stream))
            for chunk in stream:
                if stop is not None and stop.is_set():
                    stream.close()
                    raise BuildStopped(f"building {plan.tag} was stopped")
                if deadline.left() <= 0:
                    stream.close()  # the engine cancels a build whose client has gone
                    deadline.check()
                if "stream" in chunk:
                    for line in _ANSI.sub("", chunk["stream"]).splitlines():
                        layer = _LAYER.match(line)
                        if layer is not None:
                            layers.append(layer.group(1))
                        if line.strip():
                            log.append(line)
                            if not line.startswith(_QUIET_LINES):
                                say(line)
                if "error" in chunk:
                    error = str(chunk.get("error", "")).strip()
                    log.append(error)
                    say(error)
                aux = chunk.get("aux")
                if isinstance(aux, dict) and "ID" in aux:
                    image_id = aux["ID"]
        except docker.errors.APIError as exc:
            if stop is not None and stop.is_set():
                raise BuildStopped(f"building {plan.tag} was stopped") from None
            error = str(exc.explanation or exc)
            log.append(error)
        except (BuildStopped, BuildTimedOut):
            raise
        except Exception:
            if stop is not None and stop.is_set():  # the interrupt cut the connection
                raise BuildStopped(f"building {plan.tag} was stopped") from None
            if deadline.left() > 0:
                raise
            if stream is not None:
                stream.close()
            deadline.check()  # a read timed out: the build outlasted its time
            raise
    if error is not None or image_id is None:
        lines = list(log)[-tail:]
        reason = error or "the engine reported no image id"
        hint = ""
        if PROTOCOL_DISTRIBUTION in "\n".join(lines) and "onflict" in "\n".join(lines):
            hint = (
                f" ({PROTOCOL_DISTRIBUTION} is pinned to this repository's wheel; "
                "drop the version pin, or build with hermetic_build=False)"
            )

        raise ImageBuildError(f"building {plan.tag} failed: {reason}{hint}", lines)
    return image_id, list(log)


def _interrupt_on(stop: threading.Event | None, stream: Any) -> threading.Event | None:
    """When ``stop`` is set, shut the build's connection to the engine, so a read blocked on a
    silent step (``RUN sleep 40``) returns at once, not at the step's next output line, and the
    engine, its client gone, cancels the build. Returns the event that ends the watch.

    The SDK hides the connection: its build stream is a generator whose ``response`` argument
    holds it (read from the generator's frame; when that changes, the stop flag still ends the
    build at its next line, as before)."""
    if stop is None:
        return None
    try:
        response = stream.gi_frame.f_locals["response"]
        sock = response.raw._fp.fp.raw._sock
    except (AttributeError, KeyError, TypeError):
        return None
    if not isinstance(sock, socket.socket):
        return None
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if stop.wait(0.1):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                return

    threading.Thread(target=watch, name="agentenv-build-interrupt", daemon=True).start()
    return done


# -- base images the engine cannot pull -----------------------------------------------------------

#: What an engine says when a FROM image cannot be had (no registry, no such image, no access).
_PULL_FAILED = ("pull access denied", "manifest unknown", "not found", "no such host",
                "/v2/", "repository does not exist", "connection refused", "i/o timeout")


def _unpulled(client: Any, dockerfile: Path, exc: ImageBuildError) -> ImageBuildError:
    """``exc``, naming the FROM image the engine could not get and how to map it, when that is
    why the build failed."""
    message = str(exc)
    if not any(sign in message for sign in _PULL_FAILED):
        return exc
    try:
        refs = from_refs(dockerfile.read_text(encoding="utf-8"))
    except OSError:
        return exc
    missing = [ref for ref in refs if _existing_image(client, ref) is None]
    if not missing:
        return exc
    return ImageBuildError(f"{message} (FROM {missing[0]} cannot be pulled here: pull or "
                           "mirror it, and map it at import with bundle import --image-map "
                           "FROM=TO)", exc.log_tail)


_UNREACHABLE: dict[str, str] = {}  # ref -> why its pull failed (once per process)


def _pull(client: Any, ref: str) -> None:
    name, _, digest = ref.partition("@")
    repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (
        name, "", "")
    client.api.pull(repository, tag=digest or tag or "latest")


def resolve_bases(client: Any, dockerfile: Path, say: Progress) -> dict[str, str]:
    """FROM ref -> local replacement, for official images a registry cannot give here."""
    try:
        text = dockerfile.read_text(encoding="utf-8")
    except OSError:
        return {}
    found: dict[str, str] = {}
    for ref in from_refs(text):
        local = official_name(ref)
        if local is None or _existing_image(client, ref) is not None:
            continue
        why = _UNREACHABLE.get(ref)
        if why is None:
            try:
                _pull(client, ref)
                continue
            except Exception as exc:  # any failure to pull: try the local image below
                why = str(getattr(exc, "explanation", None) or exc).splitlines()[0][:160]
                _UNREACHABLE[ref] = why
        if _existing_image(client, local) is None:
            continue  # nothing to use instead: the build fails on its FROM, with the reason
        say(f"FROM {ref} cannot be pulled ({why}); using the local {local} instead")
        found[ref] = local
    return found

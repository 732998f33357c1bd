"""Image builds from a build-context folder, named by content so unchanged sources never rebuild.

The tag is ``agentenv/<slug>:<first 16 hex of the build digest>``; the build digest covers the
context as ``docker build`` would send it (:mod:`.context`), the Dockerfile name, the build args
and, for hermetic builds, our protocol wheel (:mod:`.hermetic`). So the tag existing *is* the
proof that this exact image was built: a second build with the same sources is a lookup. The
digests are also written as image labels (``agentenv.source_digest``, ``agentenv.build_digest``),
so a caller-chosen fixed tag is rebuilt only when its label differs.

Builds go through the Engine API (``docker`` SDK, legacy builder; no buildx or compose needed).
Every output line goes to the ``progress`` callback as it arrives and is kept, so a failed build
raises :class:`ImageBuildError` carrying the last lines.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from agent_env.errors import UserError
from agent_env.sandbox.base import SandboxError
from agentenv_docker_env import hermetic
from agentenv_docker_env.context import context_digest, context_entries, write_context_tar
from agentenv_docker_env.engine import docker_client

REPOSITORY_PREFIX = "agentenv"
SOURCE_DIGEST_LABEL = "agentenv.source_digest"
BUILD_DIGEST_LABEL = "agentenv.build_digest"
PROTOCOL_LABEL = "agentenv.protocol"
KEEP_LINES = 2000

Progress = Callable[[str], None]


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


@attrs.frozen
class BuildPlan:
    """What a build would send and what it would be called, computed without the engine."""

    context: Path
    dockerfile: str
    tag: str
    source_digest: str
    build_digest: str
    labels: dict[str, str]
    wheel: hermetic.ProtocolWheel | None


def slugify(name: str) -> str:
    """A Docker repository component from any name (lowercase, ``[a-z0-9._-]``)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")
    return re.sub(r"[-._]{2,}", "-", slug)[:100] or "image"


def plan_build(
    context: str | Path,
    *,
    name: str | None = None,
    tag: str | None = None,
    dockerfile: str = "Dockerfile",
    build_args: Mapping[str, str] | None = None,
    hermetic_build: bool = True,
    wheel_cache: Path | None = None,
) -> BuildPlan:
    """Hash the context (and our protocol wheel) into digests and the content-hash tag."""
    root = Path(context).resolve()
    entries = context_entries(root, dockerfile=dockerfile)
    source = context_digest(entries)
    wheel = hermetic.protocol_wheel(wheel_cache) if hermetic_build else None
    parts = {
        "source": source,
        "dockerfile": dockerfile,
        "build_args": dict(sorted((build_args or {}).items())),
        "hermetic": [hermetic.INJECTION_VERSION, wheel.digest] if wheel else None,
    }
    build = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    final_tag = tag or f"{REPOSITORY_PREFIX}/{slugify(name or root.name)}:{build[:16]}"
    labels = {SOURCE_DIGEST_LABEL: source, BUILD_DIGEST_LABEL: build}
    if wheel is not None:
        labels[PROTOCOL_LABEL] = f"{wheel.version}+{wheel.digest[:16]}"
    return BuildPlan(root, dockerfile, final_tag, source, build, labels, wheel)


def image_tag(context: str | Path, *, name: str | None = None, **kwargs: Any) -> str:
    """The tag :func:`build_image` would give ``context`` (no engine needed)."""
    return plan_build(context, name=name, **kwargs).tag


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
) -> BuiltImage:
    """Build ``context`` into ``agentenv/<slug>:<digest16>`` (or ``tag``), or reuse it.

    ``name`` picks the slug (default: the folder name). With ``hermetic_build`` the image gets
    this repository's protocol wheel (see :mod:`.hermetic`). ``progress`` receives every output
    line. Raises :class:`ImageBuildError` with the last ``tail`` lines when the build fails.
    """
    started = time.monotonic()
    client = client or docker_client()
    plan = plan_build(
        context, name=name, tag=tag, dockerfile=dockerfile, build_args=build_args,
        hermetic_build=hermetic_build,
    )
    say = progress or (lambda line: None)
    if not force:
        existing = _existing_image(client, plan.tag)
        if existing is not None and (existing.labels or {}).get(BUILD_DIGEST_LABEL) == (
            plan.build_digest
        ):
            say(f"image {plan.tag} (cached)")
            return BuiltImage(
                plan.tag, existing.id, plan.source_digest, plan.build_digest, True,
                time.monotonic() - started,
            )
    say(f"building image {plan.tag}")
    all_labels = {**(labels or {}), **plan.labels}
    image_id, log = _run_build(client, plan, all_labels, build_args, say, tail)
    took = time.monotonic() - started
    say(f"image {plan.tag} built in {took:.1f}s")
    return BuiltImage(
        plan.tag, image_id, plan.source_digest, plan.build_digest, False, took, tuple(log),
    )


def _existing_image(client: Any, tag: str) -> Any:
    import docker.errors

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def _run_build(
    client: Any,
    plan: BuildPlan,
    labels: dict[str, str],
    build_args: Mapping[str, str] | None,
    say: Progress,
    tail: int,
) -> tuple[str, list[str]]:
    import docker.errors

    entries = context_entries(plan.context, dockerfile=plan.dockerfile)
    replace: dict[str, bytes] = {}
    extra: dict[str, bytes] = {}
    if plan.wheel is not None:
        text = (plan.context / plan.dockerfile).read_text(encoding="utf-8")
        replace[Path(plan.dockerfile).as_posix()] = hermetic.inject_into_dockerfile(text).encode()
        extra = hermetic.context_files(plan.wheel)
    log: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
    image_id: str | None = None
    error: str | None = None
    with tempfile.TemporaryFile() as tar:
        write_context_tar(entries, tar, replace=replace, extra=extra)
        tar.seek(0)
        try:
            stream = client.api.build(
                fileobj=tar, custom_context=True, tag=plan.tag, labels=labels,
                dockerfile=plan.dockerfile, buildargs=dict(build_args or {}), decode=True,
                rm=True, forcerm=True, pull=False,
            )
            for chunk in stream:
                if "stream" in chunk:
                    for line in chunk["stream"].splitlines():
                        if line.strip():
                            log.append(line)
                            say(line)
                if "error" in chunk:
                    error = str(chunk.get("error", "")).strip()
                    log.append(error)
                    say(error)
                aux = chunk.get("aux")
                if isinstance(aux, dict) and "ID" in aux:
                    image_id = aux["ID"]
        except docker.errors.APIError as exc:
            error = str(exc.explanation or exc)
            log.append(error)
    if error is not None or image_id is None:
        lines = list(log)[-tail:]
        reason = error or "the engine reported no image id"
        hint = ""
        if hermetic.PROTOCOL_DISTRIBUTION in "\n".join(lines) and "onflict" in "\n".join(lines):
            hint = (
                f" ({hermetic.PROTOCOL_DISTRIBUTION} is pinned to this repository's wheel; "
                "drop the version pin, or build with hermetic_build=False)"
            )
        raise ImageBuildError(f"building {plan.tag} failed: {reason}{hint}", lines)
    return image_id, list(log)

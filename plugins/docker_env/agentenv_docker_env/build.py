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
import hashlib
import json
import re
import tempfile
import threading
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
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: Build output kept in the log but not shown as progress (the engine's bookkeeping).
_QUIET_LINES = (" ---> ", "Removing intermediate container")


class BuildStopped(SandboxError):
    """The caller gave up on a build (Ctrl-C); the engine drops it when the client goes."""


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
    #: FROM refs replaced by a local image of the same name and tag (see the module docstring).
    bases: dict[str, str] = attrs.field(factory=dict)
    #: Lines for the progress: decisions the plan made (a pin it yielded to).
    notes: tuple[str, ...] = ()


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
    bases: Mapping[str, str] | None = None,
) -> BuildPlan:
    """Hash the context (and our protocol wheel) into digests and the content-hash tag."""
    root = Path(context).resolve()
    entries = context_entries(root, dockerfile=dockerfile)
    source = context_digest(entries)
    wheel = hermetic.protocol_wheel(wheel_cache) if hermetic_build else None
    notes: list[str] = []
    yielded = None
    if wheel is not None:
        yielded = hermetic.conflicting_pin(hermetic.pin_candidates(entries, dockerfile),
                                           wheel.version)
        if yielded is not None:
            notes.append(f"{yielded} is not this repository's protocol ({wheel.version}): the "
                         "image gets that PyPI release (the reference's; same wire)")
            wheel = None
    parts = {
        "source": source,
        "dockerfile": dockerfile,
        "build_args": dict(sorted((build_args or {}).items())),
        "hermetic": [hermetic.INJECTION_VERSION, wheel.digest] if wheel else (
            ["yielded", yielded] if yielded else None),
    }
    if bases:
        parts["bases"] = dict(sorted(bases.items()))
    build = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    final_tag = tag or f"{REPOSITORY_PREFIX}/{slugify(name or root.name)}:{build[:16]}"
    labels = {SOURCE_DIGEST_LABEL: source, BUILD_DIGEST_LABEL: build}
    if wheel is not None:
        labels[PROTOCOL_LABEL] = f"{wheel.version}+{wheel.digest[:16]}"
    return BuildPlan(root, dockerfile, final_tag, source, build, labels, wheel,
                     dict(bases or {}), tuple(notes))


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
    stop: threading.Event | None = None,
) -> BuiltImage:
    """Build ``context`` into ``agentenv/<slug>:<digest16>`` (or ``tag``), or reuse it.

    ``name`` picks the slug (default: the folder name). With ``hermetic_build`` the image gets
    this repository's protocol wheel (see :mod:`.hermetic`). ``progress`` receives every output
    line. Raises :class:`ImageBuildError` with the last ``tail`` lines when the build fails.
    ``stop`` set (the caller was cancelled) abandons the build at its next output line: the
    engine cancels a build whose client has gone.
    """
    started = time.monotonic()
    client = client or docker_client()
    say = progress or (lambda line: None)
    bases = resolve_bases(client, Path(context) / dockerfile, say)
    plan = plan_build(
        context, name=name, tag=tag, dockerfile=dockerfile, build_args=build_args,
        hermetic_build=hermetic_build, bases=bases,
    )
    for note in plan.notes:
        say(note)
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
    image_id, log = _run_build(client, plan, all_labels, build_args, say, tail, stop)
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
    stop: threading.Event | None = None,
) -> tuple[str, list[str]]:
    import docker.errors

    entries = context_entries(plan.context, dockerfile=plan.dockerfile)
    replace: dict[str, bytes] = {}
    extra: dict[str, bytes] = {}
    if plan.wheel is not None or plan.bases:
        text = (plan.context / plan.dockerfile).read_text(encoding="utf-8")
        text = substitute_bases(text, plan.bases)
        if plan.wheel is not None:
            text = hermetic.inject_into_dockerfile(text)
            extra = hermetic.context_files(plan.wheel)
        replace[Path(plan.dockerfile).as_posix()] = text.encode()
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
                if stop is not None and stop.is_set():
                    stream.close()
                    raise BuildStopped(f"building {plan.tag} was stopped")
                if "stream" in chunk:
                    for line in _ANSI.sub("", chunk["stream"]).splitlines():
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


# -- base images the engine cannot pull -----------------------------------------------------------

#: Registries that serve the Docker Official Images under ``library/``.
OFFICIAL_MIRRORS = ("public.ecr.aws/docker/library/", "docker.io/library/",
                    "index.docker.io/library/", "registry-1.docker.io/library/",
                    "mirror.gcr.io/library/")
_UNREACHABLE: dict[str, str] = {}  # ref -> why its pull failed (once per process)


def from_refs(text: str) -> list[str]:
    """The image refs of a Dockerfile's ``FROM`` lines (stages and ``$ARG`` refs left out)."""
    joined = re.sub(r"\\\n", " ", text)
    stages: set[str] = set()
    refs = []
    for line in joined.splitlines():
        words = line.split()
        if not words or words[0].upper() != "FROM":
            continue
        words = [w for w in words[1:] if not w.startswith("--")]
        if not words:
            continue
        ref = words[0]
        if len(words) >= 3 and words[1].upper() == "AS":
            stages.add(words[2].lower())
        if ref.lower() not in stages and "$" not in ref and ref.lower() != "scratch":
            refs.append(ref)
    return refs


def official_name(ref: str) -> str | None:
    """``python:3.11-slim`` for an official image named through a mirror or by digest."""
    name, _, digest = ref.partition("@")
    for mirror in OFFICIAL_MIRRORS:
        if name.startswith(mirror):
            name = name[len(mirror):]
            break
    else:
        if not digest or "/" in name:
            return None
    if ":" not in name or "/" in name:
        return None
    return name if name != ref else None


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


def substitute_bases(text: str, bases: Mapping[str, str]) -> str:
    """The Dockerfile with every substituted FROM ref replaced."""
    for ref, local in bases.items():
        text = re.sub(rf"(^\s*FROM\s+(?:--\S+\s+)*){re.escape(ref)}(?=\s|$)",
                      lambda m, local=local: m.group(1) + local, text,
                      flags=re.IGNORECASE | re.MULTILINE)
    return text

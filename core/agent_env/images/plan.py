"""The build plan: what a build sends and the content-hash tag it gets, without any engine.

The tag is ``agentenv/<slug>:<first 16 hex of the build digest>``; the build digest covers the
context as ``docker build`` would send it (:mod:`.context`), the Dockerfile name, the build args,
any base-image substitutions and, for hermetic builds, our protocol wheel (:mod:`.hermetic`). So
the tag existing *is* the proof that this exact image was built: a second build of the same
sources is a lookup on whichever engine holds it. The digests are also written as image labels
(``agentenv.source_digest``, ``agentenv.build_digest``), so a caller-chosen fixed tag is rebuilt
only when its label differs.

Base images a registry cannot give: the engine decides which ``FROM`` refs to replace by a local
image of the same name and tag (docker_env's ``resolve_bases``); the plan records them in
``bases`` and :func:`write_build_tar` rewrites those ``FROM`` lines.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import attrs

from agent_env.images import hermetic
from agent_env.images.context import context_digest, context_entries, write_context_tar

REPOSITORY_PREFIX = "agentenv"
SOURCE_DIGEST_LABEL = "agentenv.source_digest"
BUILD_DIGEST_LABEL = "agentenv.build_digest"
PROTOCOL_LABEL = "agentenv.protocol"
#: Set by a ``LABEL`` line after every ``FROM`` of every build, so each step's image carries
#: it: the step images a build killed with ``-9`` leaves (untagged) can then be told from other
#: images, and ``agent-env gc`` removes them (a provider's ``prune_build_leftovers``).
BUILDER_LABEL = "agentenv.builder"
BUILDER = "agent-env"


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
    #: FROM refs replaced by a local image of the same name and tag.
    bases: dict[str, str] = attrs.field(factory=dict)
    #: Lines for the progress: decisions the plan made (a pin it yielded to).
    notes: tuple[str, ...] = ()


def slugify(name: str) -> str:
    """A Docker repository component from any name (lowercase, ``[a-z0-9._-]``)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")
    return re.sub(r"[-._]{2,}", "-", slug)[:100] or "image"


def split_tag(tag: str) -> tuple[str | None, str | None]:
    """``(name, explicit tag)`` for the contract's ``build_image`` ``tag`` argument.

    A ``tag`` with ``:`` in its last component is used as is; without, it is the repository
    slug and the plan completes it with the content hash."""
    explicit = tag if ":" in tag.rsplit("/", 1)[-1] else None
    return (None if explicit else tag), explicit


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
    parts: dict[str, Any] = {
        "source": source,
        "dockerfile": dockerfile,
        "build_args": dict(sorted((build_args or {}).items())),
        "hermetic": [hermetic.INJECTION_VERSION, wheel.digest] if wheel else (
            ["yielded", yielded] if yielded else None),
        "step_label": BUILDER,
    }
    if bases:
        parts["bases"] = dict(sorted(bases.items()))
    build = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    final_tag = tag or f"{REPOSITORY_PREFIX}/{slugify(name or root.name)}:{build[:16]}"
    labels = {SOURCE_DIGEST_LABEL: source, BUILD_DIGEST_LABEL: build, BUILDER_LABEL: BUILDER}
    if wheel is not None:
        labels[PROTOCOL_LABEL] = f"{wheel.version}+{wheel.digest[:16]}"
    return BuildPlan(root, dockerfile, final_tag, source, build, labels, wheel,
                     dict(bases or {}), tuple(notes))


def image_tag(context: str | Path, *, name: str | None = None, **kwargs: Any) -> str:
    """The tag a build of ``context`` gets (no engine needed)."""
    return plan_build(context, name=name, **kwargs).tag


def write_build_tar(plan: BuildPlan, fileobj: IO[bytes]) -> None:
    """Write the context the plan describes, as the engine receives it, to ``fileobj``.

    That is the context on disk with the Dockerfile's substituted bases and, for a hermetic
    plan, our wheel and constraints added and the Dockerfile injected; the files on disk are
    never touched."""
    entries = context_entries(plan.context, dockerfile=plan.dockerfile)
    extra: dict[str, bytes] = {}
    text = (plan.context / plan.dockerfile).read_text(encoding="utf-8")
    text = substitute_bases(text, plan.bases)
    if plan.wheel is not None:
        text = hermetic.inject_into_dockerfile(text)
        extra = hermetic.context_files(plan.wheel)
    text = hermetic.after_each_from(text, [f"LABEL {BUILDER_LABEL}={BUILDER}"])
    replace = {Path(plan.dockerfile).as_posix(): text.encode()}
    write_context_tar(entries, fileobj, replace=replace, extra=extra)


# -- FROM lines -------------------------------------------------------------------------------

#: Registries that serve the Docker Official Images under ``library/``.
OFFICIAL_MIRRORS = ("public.ecr.aws/docker/library/", "docker.io/library/",
                    "index.docker.io/library/", "registry-1.docker.io/library/",
                    "mirror.gcr.io/library/")


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


def substitute_bases(text: str, bases: Mapping[str, str]) -> str:
    """The Dockerfile with every substituted FROM ref replaced."""
    for ref, local in bases.items():
        text = re.sub(rf"(^\s*FROM\s+(?:--\S+\s+)*){re.escape(ref)}(?=\s|$)",
                      _from_line_with(local), text, flags=re.IGNORECASE | re.MULTILINE)
    return text


def _from_line_with(local: str) -> Callable[[re.Match[str]], str]:
    """A replacement keeping the FROM prefix; a function, so ``local`` is never a regex template."""
    return lambda m: m.group(1) + local

"""How a running step reads artifacts: by id, at the version the run pinned.

The engine does not care where artifacts live; a run hands its context an
:class:`ArtifactSource`. Bundle runs and stored tasks read the stores
(:class:`agent_env.bundles.entities.StoredArtifacts`); tests use :class:`MemoryArtifacts`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import attrs

#: Artifact types: a file artifact (its files, one version) or a universe of them.
FILE = "file"
FILE_UNIVERSE = "file_artifact_universe"
DOCKER_IMAGE = "docker_image"
#: A skill: a folder holding :data:`SKILL_FILE` (``artifact skill put``, a bundle's
#: ``skills/<name>``), given to agents through skill-config/v1.
SKILL = "skill"
SKILL_FILE = "SKILL.md"


@attrs.frozen
class ArtifactFile:
    """One file of an artifact; ``path`` is relative to the artifact's folder, POSIX style."""

    path: str
    data: bytes = attrs.field(repr=False)
    mode: int = 0o644


def _files(items: Iterable[ArtifactFile]) -> tuple[ArtifactFile, ...]:
    """``converter=tuple`` with a type mypy can check (see :mod:`agent_env._tuples`)."""
    return tuple(items)


@attrs.frozen
class ArtifactContent:
    id: str
    version: int
    type: str
    files: tuple[ArtifactFile, ...] = attrs.field(converter=_files, factory=tuple)

    def file(self, path: str) -> ArtifactFile:
        for item in self.files:
            if item.path == path:
                return item
        raise KeyError(f"artifact {self.id} has no file '{path}'")


class ArtifactSource(Protocol):
    async def load(self, artifact_id: str, version: int | None = None) -> ArtifactContent:
        """The artifact's files at ``version`` (None: the run's pin, else the latest);
        ``LookupError`` with a clear message when it, or that version, does not exist."""
        ...


class MemoryArtifacts:
    """Artifacts held in memory (tests, and callers that built them on the fly)."""

    def __init__(self, artifacts: Iterable[ArtifactContent] = ()) -> None:
        self._by_id = {a.id: a for a in artifacts}

    def add(self, artifact: ArtifactContent) -> None:
        self._by_id[artifact.id] = artifact

    async def load(self, artifact_id: str, version: int | None = None) -> ArtifactContent:
        try:
            found = self._by_id[artifact_id]
        except KeyError:
            raise LookupError(f"no artifact '{artifact_id}'") from None
        if version is not None and found.version != version:
            raise LookupError(f"artifact '{artifact_id}' has no version {version} here (it is "
                              f"v{found.version})")
        return found

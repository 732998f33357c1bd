"""How a running step reads artifacts: by id, at the version the run pinned.

The engine does not care where artifacts live; a run hands its context an
:class:`ArtifactSource`. Bundle runs and stored tasks read the stores
(:class:`agent_env.bundles.entities.StoredArtifacts`); tests use :class:`MemoryArtifacts`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import attrs

from agent_env.errors import UserError

#: Artifact types: a file artifact (its files, one version) or a universe of them.
FILE = "file"
FILE_UNIVERSE = "file_artifact_universe"
DOCKER_IMAGE = "docker_image"
#: A skill: a folder holding :data:`SKILL_FILE` (``artifact skill put``, a bundle's
#: ``skills/<name>``), given to agents through skill-config/v1.
SKILL = "skill"
SKILL_FILE = "SKILL.md"
#: Data for one env server, named by its ``environment_name``: one file, which ``load_artifact``
#: into an env hands to that server (``data/reset``, then ``data/add`` of the file).
ENVIRONMENT = "environment"
#: Data for several env servers at once: a folder per environment (``<environment_name>/<file>``)
#: and optional ``metadata/<key>/<file>``, as the reference lays a universe out on disk.
ENVIRONMENT_UNIVERSE = "environment_universe"
UNIVERSE_METADATA = "metadata"
#: A command-line tool: its files, the ``entrypoint`` among them and the ``command_name`` it is
#: installed as; ``load_artifact`` into an agent installs it at ``/opt/cli/<command_name>/``.
CLI = "cli"
CLI_ROOT = "/opt/cli"
#: The file beside a CLI's entrypoint that names the env's gateway (``AGENT_ENV_GATEWAY_URL``).
GATEWAY_ENV_FILE = ".env"
_COMMAND_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


@attrs.frozen
class CliSpec:
    """What makes a ``cli`` artifact's files a command: its entrypoint (a path among them) and
    the name it is installed as; the env it was made for, when it says (informational)."""

    command_name: str
    entrypoint: str
    env_id: str | None = None
    env_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, doc: Any) -> CliSpec | None:
        if not isinstance(doc, dict):
            return None
        return cls(str(doc.get("command_name")), str(doc.get("entrypoint")),
                   doc.get("env_id"), doc.get("env_version"))

    def problems(self, paths: Iterable[str]) -> list[str]:
        """What keeps it from being installed: a command name that is not one word, an
        entrypoint that is not one of ``paths``."""
        found = []
        if not _COMMAND_NAME.fullmatch(self.command_name):
            found.append(f"command_name {self.command_name!r} must be one word (letters, "
                         "digits, '.', '_', '-')")
        if self.entrypoint not in set(paths):
            found.append(f"entrypoint {self.entrypoint!r} is not one of its files")
        return found


@attrs.frozen
class UniverseLayout:
    """A universe's files read by their paths: ``environments`` and ``metadata`` map a name
    (or key) to the path of its one file."""

    environments: dict[str, str]
    metadata: dict[str, str]


def universe_layout(paths: Iterable[str]) -> tuple[UniverseLayout, list[str]]:
    """How a universe's file paths read (see :data:`ENVIRONMENT_UNIVERSE`), and every problem:
    a file outside any folder, a folder holding more than one file, ``metadata/`` holding a
    file itself. A name may hold ``/`` (nested folders)."""
    held: dict[str, list[str]] = {}
    problems: list[str] = []
    for path in sorted(paths):
        folder, _, _name = path.rpartition("/")
        if not folder:
            problems.append(f"{path}: a universe holds a folder per environment "
                            "(<environment_name>/<file>); move it into one")
        elif folder == UNIVERSE_METADATA:
            problems.append(f"{path}: metadata/ holds a folder per key (metadata/<key>/<file>)")
        else:
            held.setdefault(folder, []).append(path)
    environments: dict[str, str] = {}
    metadata: dict[str, str] = {}
    for folder, files in sorted(held.items()):
        if len(files) != 1:
            problems.append(f"{folder}/: holds one file, and has {len(files)} "
                            f"({', '.join(f.rpartition('/')[2] for f in files)})")
            continue
        if folder.startswith(UNIVERSE_METADATA + "/"):
            metadata[folder.removeprefix(UNIVERSE_METADATA + "/")] = files[0]
        else:
            environments[folder] = files[0]
    if not environments and not problems:
        problems.append("a universe needs at least one environment (a folder named after it, "
                        "holding its file)")
    return UniverseLayout(environments, metadata), problems


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
    #: The env server an :data:`ENVIRONMENT` artifact seeds.
    environment_name: str | None = None
    #: What makes a :data:`CLI` artifact a command.
    cli: CliSpec | None = None

    def environments(self) -> dict[str, ArtifactFile]:
        """The data this artifact holds per environment name: an environment artifact's one
        file, or a universe's file per folder (its metadata left out); empty for other types."""
        if self.type == ENVIRONMENT and self.environment_name and len(self.files) == 1:
            return {self.environment_name: self.files[0]}
        if self.type != ENVIRONMENT_UNIVERSE:
            return {}
        layout, _ = universe_layout(f.path for f in self.files)
        return {name: self.file(path) for name, path in layout.environments.items()}

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


def safe_targets(output_dir: Path, paths: list[str]) -> dict[str, Path]:
    """Where each stored path goes under ``output_dir``; UserError naming every path that would
    land outside it (``..``, absolute, a drive, or through a symlink leading out)."""
    root = output_dir.resolve()
    targets: dict[str, Path] = {}
    bad: list[str] = []
    for path in paths:
        parts = path.split("/")
        if (not path or path.startswith("/") or "\\" in path or ".." in parts
                or any(p in ("", ".") for p in parts)):
            bad.append(path)
            continue
        target = root.joinpath(*parts)
        if not Path(os.path.realpath(target)).is_relative_to(root):
            bad.append(path)
            continue
        targets[path] = target
    if bad:
        raise UserError(f"refusing to write outside {output_dir}: "
                        f"{', '.join(repr(b) for b in bad)} (nothing was written)")
    return targets

"""What a parsed bundle holds: records for its tasks, artifacts, envs and evals, with ids."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from agent_env.plural import plural
from agent_env.tasks.artifacts import CliSpec

#: The folders that make a folder a bundle.
BUNDLE_FOLDERS = ("envs", "agents", "artifacts", "skills", "tasks", "evals")


def local_id_root(folder: Path) -> str:
    """``@local/<absolute path, $HOME shown as ~>`` for a folder bundle."""
    path = str(folder.resolve())
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home):]
    return "@local/" + path.lstrip("/")


def installed_id_root(distribution: str, name: str) -> str:
    """``@local/<distribution>/<name>`` for a bundle a package ships."""
    return f"@local/{distribution}/{name}"


@attrs.frozen
class BundleFile:
    """A file of an artifact or env: ``path`` relative to its folder, POSIX style."""

    path: str
    source: Path
    sha256: str
    size: int
    mode: int


@attrs.frozen
class ArtifactEntry:
    name: str
    id: str
    type: str
    label: str
    files: tuple[BundleFile, ...]
    #: The env server an ``environment`` artifact seeds (stored with it; None for other types).
    environment_name: str | None = None
    #: A ``cli`` artifact's command (stored with it as ``cli``).
    cli: CliSpec | None = None


@attrs.frozen
class EnvEntry:
    name: str
    id: str
    type: str
    label: str
    folder: Path
    files: tuple[BundleFile, ...]
    image: str | None = None
    environment_name: str | None = None
    #: The env.toml keys its type reads beyond the kernel's (``type``, ``image``,
    #: ``environment_name``, ``id``): a ``multi`` env's ``mcp_server_envs``, say. Its env type
    #: checks them (:meth:`agent_env.env_types.EnvType.bundle_problems`).
    settings: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class AgentEntry:
    """An agent folder of the bundle (``agents/<name>``: a Dockerfile, an ``agent.toml`` or
    both), stored as the agents plugin stores one (file entity kind ``agents``)."""

    name: str
    id: str
    label: str
    folder: Path
    files: tuple[BundleFile, ...]
    type: str = "agent"


@attrs.frozen
class TaskEntry:
    """A task file; ``raw_steps`` as written, normalised (entity names not yet rewritten)."""

    name: str
    id: str
    label: str
    raw_steps: tuple[Any, ...]


@attrs.frozen
class EvalEntry:
    name: str
    id: str
    label: str
    task_names: tuple[str, ...]
    type: str | None = None


@attrs.frozen
class Bundle:
    folder: Path
    id_root: str
    description: str
    tasks: tuple[TaskEntry, ...] = ()
    artifacts: tuple[ArtifactEntry, ...] = ()
    envs: tuple[EnvEntry, ...] = ()
    evals: tuple[EvalEntry, ...] = ()
    #: kind -> {alias or name: entity name}
    aliases: dict[str, dict[str, str]] = attrs.field(factory=dict)
    agents: tuple[AgentEntry, ...] = ()

    def entity_ids(self) -> dict[str, dict[str, str]]:
        """kind -> {name or alias: id}: what a step field may name."""
        ids: dict[str, dict[str, str]] = {
            "artifacts": {a.name: a.id for a in self.artifacts},
            "envs": {e.name: e.id for e in self.envs},
            "tasks": {t.name: t.id for t in self.tasks},
            "evals": {e.name: e.id for e in self.evals},
            "agents": {a.name: a.id for a in self.agents},
        }
        for kind, table in self.aliases.items():
            names = ids.setdefault(kind, {})
            for alias, name in table.items():
                if name in names and alias not in names:
                    names[alias] = names[name]
        return ids

    def task(self, name: str) -> TaskEntry | None:
        """A task by file stem, file name or ``tasks/<file>``."""
        stem = name.removeprefix("tasks/").removesuffix(".json")
        return next((t for t in self.tasks if t.name == stem), None)

    def eval(self, name: str) -> EvalEntry | None:
        stem = name.removeprefix("evals/").removesuffix(".toml")
        return next((e for e in self.evals if e.name == stem), None)

    def contents(self) -> str:
        """``1 task``, ``2 tasks, 1 eval``: what the listing shows."""
        parts = []
        for noun, count in (("task", len(self.tasks)), ("eval", len(self.evals))):
            if count:
                parts.append(plural(count, noun))
        return ", ".join(parts) or "empty"

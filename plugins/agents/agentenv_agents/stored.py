"""Agents registered with ``agent-env a2a-agent put``: versioned entities of kind ``agents``.

Why beside the installed ones: an eval author's own agent (a folder with a Dockerfile and an
``agent.toml``, or an image someone else built) should not need a plugin. ``put`` stores it
through the bundles' ledger (a file table whose contents are content-addressed in the object
store; unchanged sources are the same version), and ``deploy_agent`` finds it by id and
``a2a_agent_version`` when no installed agent has that id. An image ref alone is stored as a
one-line ``agent.toml`` (``image = "..."``), so both forms are one kind of entity.

To deploy, a version's files are laid out once under ``<state root>/agents/<content hash>/``
(an agent type builds from a folder); a version never changes, so the folder is reused.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import attrs

from agent_env.api import (
    AGENT_FILE,
    AgentDefinition,
    UserError,
    current,
    folder_files,
    missing_contribution,
    put_files_entity,
    stored_folder,
)

from .definitions import read_agent

KIND = "agents"
#: The ledger's file-entity ``type`` for agents.
ENTITY_TYPE = "agent"
#: An image reference as Docker writes one: [host[:port]/]path[:tag][@digest], no spaces.
IMAGE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$")


@attrs.frozen
class AgentSettings:
    """What ``a2a-agent put`` sets over the folder's ``agent.toml`` (the reference's
    ``--dockerfile``, ``--env-var``, ``--metadata``, ``--default-model``,
    ``--min-disk-size-gb``)."""

    dockerfile: str | None = None
    env_vars: dict[str, str] = attrs.field(factory=dict)
    metadata: dict[str, Any] = attrs.field(factory=dict)

    def __bool__(self) -> bool:
        return bool(self.dockerfile or self.env_vars or self.metadata)

    def applied(self, folder: Path, scratch: Path) -> Path:
        """A copy of ``folder`` in ``scratch`` whose ``agent.toml`` carries these settings."""
        import shutil

        import tomlkit

        copy = scratch / "agent"
        shutil.copytree(folder, copy, symlinks=True)
        path = copy / AGENT_FILE
        document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() \
            else tomlkit.document()
        if self.dockerfile:
            document["dockerfile"] = self.dockerfile
        for table, values in (("default_env_vars", self.env_vars), ("metadata", self.metadata)):
            if values:
                merged = dict(document.get(table) or {})
                merged.update(values)
                document[table] = merged
        path.write_text(tomlkit.dumps(document), encoding="utf-8")
        return copy


def agent_files(agent_id: str, folder: Path | None, image_ref: str | None,
                scratch: Path, settings: AgentSettings | None = None) -> list[Any]:
    """The file table to store; every problem at once, as one UserError.

    With only ``image_ref``, the folder is one in ``scratch`` holding a generated ``agent.toml``;
    ``settings`` are written into (a copy of) the folder's ``agent.toml``.
    """
    if folder is None and not image_ref:
        raise UserError("give --folder DIR (an agent.toml and its Dockerfile) or --image-ref "
                        "IMAGE")
    if folder is not None and image_ref:
        raise UserError("give --folder or --image-ref, not both (an agent.toml's image = "
                        "names a prebuilt image)")
    if folder is None:
        assert image_ref is not None
        if not IMAGE_REF.match(image_ref):
            raise UserError(f"--image-ref {image_ref!r} is not an image reference (such as "
                            "registry.example/agent:1.4)")
        folder = scratch / "image"
        folder.mkdir()
        (folder / AGENT_FILE).write_text(f'type = "a2a"\nimage = {json.dumps(image_ref)}\n',
                                         encoding="utf-8")
    elif not folder.is_dir():
        raise UserError(f"--folder {folder}: not a folder")
    if settings:
        folder = settings.applied(folder, scratch)
    definition = read_agent(agent_id, folder)  # a bad agent.toml: its one-line error
    host = current().host
    if definition.type not in host.registry("agent_type"):  # never store what cannot run
        raise missing_contribution(host, "agent_type", definition.type)
    files = folder_files(folder, dockerfile=definition.dockerfile)
    if definition.type == "a2a" and not definition.image and not any(
            f.path == definition.dockerfile for f in files):
        raise UserError(f"{folder}: has no {definition.dockerfile} (an a2a agent without "
                        "image = in its agent.toml is built from one)")
    return files


def put_agent(agent_id: str, folder: Path | None, image_ref: str | None,
              settings: AgentSettings | None = None) -> Any:
    """Store the agent as the next version of ``agent_id`` (unchanged: the same version);
    returns the ledger line."""
    if installed_agent(agent_id) is not None:
        raise UserError(f"'{agent_id}' is an installed agent's id (a2a-agent list): store "
                        "yours under another id")
    with tempfile.TemporaryDirectory(prefix="agent-env-agent-put-") as scratch:
        files = agent_files(agent_id, folder, image_ref, Path(scratch), settings)
        return put_files_entity(KIND, agent_id, ENTITY_TYPE, f"agent {agent_id}", files)


def installed_agent(agent_id: str) -> Any:
    """The installed agent source (name or alias) ``agent_id``, or None."""
    for contribution in current().host.contributions("agent"):
        source = contribution.obj
        if contribution.status == "active" and agent_id in (source.name, *source.aliases):
            return source
    return None


def stored_record(agent_id: str, version: int | None = None) -> Any:
    """The stored agent's record, or None when nothing is stored under that id; a version the
    agent does not have is a UserError naming its latest."""
    store = current().versioned_store
    record = store.get(KIND, agent_id, version)
    if record is None and version is not None:
        latest = store.latest_version(KIND, agent_id)
        if latest:
            raise UserError(f"agent '{agent_id}' has no version {version} (the latest is "
                            f"v{latest})")
    return record


def load_stored_agent(record: Any) -> AgentDefinition:
    """The stored version as a definition whose folder holds its files (laid out once)."""
    return read_agent(record.id, stored_folder(KIND, record))


def stored_rows() -> list[dict[str, Any]]:
    """One row per stored agent (its latest version), for ``a2a-agent list``."""
    store = current().versioned_store
    rows = []
    for agent_id in store.list_ids(KIND):
        record = store.get(KIND, agent_id)
        if record is not None:
            rows.append({"id": agent_id, "version": record.version,
                         "files": len(record.body.get("files") or {})})
    return rows

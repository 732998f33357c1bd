"""Reading stored entities back: artifacts for running steps, tasks for ``task run``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile, CliSpec


class StoredArtifacts:
    """An :class:`ArtifactSource` over the stores; ``pins`` fix the version per id."""

    def __init__(self, versioned: Any, objects: Any, pins: Mapping[str, int] | None = None):
        self.versioned = versioned
        self.objects = objects
        self.pins = dict(pins or {})
        self._cache: dict[tuple[str, int], ArtifactContent] = {}

    async def load(self, artifact_id: str, version: int | None = None) -> ArtifactContent:
        import asyncio

        return await asyncio.to_thread(self.load_now, artifact_id, version)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled to run elsewhere (a runner's worker on another node): only the pins travel,
        and the other side reads from its own configured stores, which must be the same."""
        return (stored_artifacts, (self.pins,))

    def load_now(self, artifact_id: str, version: int | None = None) -> ArtifactContent:
        wanted = version if version is not None else self.pins.get(artifact_id)
        record = self.versioned.get("artifacts", artifact_id, wanted)
        if record is None:
            at = f" version {version}" if version is not None else ""
            raise LookupError(f"no artifact '{artifact_id}'{at} is stored")
        key = (artifact_id, record.version)
        if key not in self._cache:
            files = [
                ArtifactFile(path, self.objects.get(meta["key"]), int(meta.get("mode", 0o644)))
                for path, meta in sorted(record.body.get("files", {}).items())
            ]
            self._cache[key] = ArtifactContent(
                artifact_id, record.version, record.body.get("type", "file"), tuple(files),
                record.body.get("environment_name"), CliSpec.from_json(record.body.get("cli")),
            )
        return self._cache[key]


def stored_artifacts(pins: Mapping[str, int] | None = None) -> StoredArtifacts:
    """Artifacts (and envs) read from the configured stores: at ``pins``' versions, else the
    latest."""
    from agent_env.runtime import current

    return StoredArtifacts(current().versioned_store, current().object_store, pins)


def write_stored_files(objects: Any, files: Mapping[str, Mapping[str, Any]], folder: Path,
                       owner: str) -> None:
    """Lay a stored file table (``path -> {key, mode}``, as the ledger writes it) out under
    ``folder``, contents from ``objects``, with their modes. A path that would escape
    ``folder`` is refused with a ValueError naming ``owner`` (nothing is written for it)."""
    import os
    import posixpath

    for path, meta in sorted(files.items()):
        parts = path.split("/")
        if posixpath.isabs(path) or ".." in parts:
            raise ValueError(f"{owner} has a file path that escapes its folder: '{path}'")
        target = folder.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(objects.get(meta["key"]))
        os.chmod(target, int(meta.get("mode", 0o644)))


@attrs.frozen
class StoredEntities:
    """What the stores hold, for preflight of ids (and pinned versions) from outside a bundle.
    Any stored id counts, ``@``-rooted or plain (``artifact file put --id hv`` stores ``hv``)."""

    versioned: Any

    def __call__(self, kind: str, entity_id: str) -> bool:
        return self.latest(kind, entity_id) > 0

    def latest(self, kind: str, entity_id: str) -> int:
        """The latest stored version of ``entity_id`` (0: none, or not an id at all)."""
        try:
            return int(self.versioned.latest_version(kind, entity_id))
        except ValueError:  # the store refuses it as an id: nothing can be stored under it
            return 0


def stored_task(versioned: Any, task_id: str, version: int | None = None) -> Any:
    """The stored task ``task_id`` (the latest unless ``version``); a UserError naming how to
    store one when there is none."""
    from agent_env.errors import UserError

    record = versioned.get("tasks", task_id, version)
    if record is None:
        at = f" version {version}" if version else ""
        raise UserError(f"no task '{task_id}'{at} is stored (agent-env task create FILE --id "
                        f"{task_id} stores one; agent-env run and Task.from_bundle store a "
                        "bundle's tasks)")
    return record


def entity_exists(versioned: Any) -> StoredEntities:
    """The ``stored`` check preflight takes for ids from outside a bundle."""
    return StoredEntities(versioned)


"""Folders stored as versioned file entities: what ``a2a-agent put`` keeps, laid out again to
run. A file table whose contents are content-addressed in the object store (the ledger's
files entities); unchanged contents are the same version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_env.bundles.entities import write_stored_files


def folder_files(folder: Path, *, dockerfile: str | None = None) -> list[Any]:
    """The files of ``folder`` as a build context (``.dockerignore`` honoured when
    ``dockerfile`` is given), sorted; one UserError with every problem (a link out, a file
    too big...)."""
    from agent_env.bundles.parse import collect_files
    from agent_env.errors import UserError

    problems: list[str] = []
    files = collect_files(folder, str(folder), problems, build_context=dockerfile is not None,
                          dockerfile=dockerfile or "Dockerfile")
    if problems:
        raise UserError("; ".join(problems))
    return sorted(files, key=lambda f: f.path)


def put_files_entity(kind: str, entity_id: str, entity_type: str, label: str,
                     files: list[Any]) -> Any:
    """Store ``files`` (from :func:`folder_files`) as the next version of ``entity_id`` under
    ``kind`` (unchanged content: the same version); returns the ledger line."""
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.model import ArtifactEntry
    from agent_env.runtime import object_store, versioned_store

    entry = ArtifactEntry(entity_id.rsplit("/", 1)[-1], entity_id, entity_type, label,
                          tuple(files))
    ledger = Ledger(versioned_store(), object_store())
    ledger.write_files_entity(kind, entry)
    return ledger.lines[-1]


def stored_folder(kind: str, record: Any) -> Path:
    """A stored file entity's files laid out once under ``<state root>/<kind>/<content
    hash>/`` (shared by every run; written aside and renamed, so readers never see half)."""
    import shutil
    import tempfile

    from agent_env.errors import UserError
    from agent_env.runtime import current, object_store

    folder = current().config.state_root / kind / record.content_hash
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{record.content_hash}-", dir=folder.parent))
        try:
            try:
                write_stored_files(object_store(), record.body.get("files") or {}, partial,
                                   f"{kind} {record.id} v{record.version}")
            except ValueError as exc:
                raise UserError(str(exc)) from None
            try:
                partial.rename(folder)
            except OSError:  # another process laid it out first: theirs is the same content
                pass
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return folder

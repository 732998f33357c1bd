"""Folders stored as versioned file entities: what ``a2a-agent put`` keeps, laid out again to
run. A file table whose contents are content-addressed in the object store (the ledger's
files entities); unchanged contents are the same version."""

from __future__ import annotations

from collections.abc import Mapping
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
                     files: list[Any], *, cli: Any = None) -> Any:
    """Store ``files`` (from :func:`folder_files`) as the next version of ``entity_id`` under
    ``kind`` (unchanged content: the same version); returns the ledger line. ``cli``: what
    makes a ``cli`` artifact a command (a :class:`~agent_env.tasks.artifacts.CliSpec`)."""
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.model import ArtifactEntry
    from agent_env.runtime import current

    entry = ArtifactEntry(entity_id.rsplit("/", 1)[-1], entity_id, entity_type, label,
                          tuple(files), cli=cli)
    ledger = Ledger(current().versioned_store, current().object_store)
    ledger.write_files_entity(kind, entry)
    return ledger.lines[-1]


def put_artifact_bytes(artifact_id: str, artifact_type: str, files: Mapping[str, bytes],
                       label: str, *, cli: Any = None,
                       modes: Mapping[str, int] | None = None) -> Any:
    """Store ``files`` (path -> bytes, made by a run rather than read from a folder) as the
    next version of artifact ``artifact_id`` (unchanged content: the same version); returns
    the ledger line. Each file's bytes go to the object store by content first. ``modes``:
    path -> file mode (default 0644); ``cli``: as :func:`put_files_entity`."""
    import hashlib

    from agent_env.bundles.ledger import blob_key
    from agent_env.bundles.model import BundleFile
    from agent_env.runtime import current
    from agent_env.stores import ObjectExists

    objects = current().object_store
    entries = []
    for path, data in sorted(files.items()):
        digest = hashlib.sha256(data).hexdigest()
        key = blob_key(digest)
        if not objects.exists(key):
            try:
                objects.put(key, data)
            except ObjectExists:  # another run wrote the same content first
                pass
        entries.append(BundleFile(path, Path(key), digest, len(data),
                                  (modes or {}).get(path, 0o644)))
    return put_files_entity("artifacts", artifact_id, artifact_type, label, entries, cli=cli)


def stored_folder(kind: str, record: Any) -> Path:
    """A stored file entity's files laid out once under ``<state root>/<kind>/<content
    hash>/`` (shared by every run; written aside and renamed, so readers never see half)."""
    import shutil
    import tempfile

    from agent_env.errors import UserError
    from agent_env.runtime import current

    folder = current().config.state_root / kind / record.content_hash
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{record.content_hash}-", dir=folder.parent))
        try:
            try:
                write_stored_files(current().object_store, record.body.get("files") or {}, partial,
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


# -- envs registered from a build context (``env <type> put``) ------------------------------------


def env_entry(env_id: str, env_type: str, context: Path | None, dockerfile: Path | None,
              image_ref: str | None, environment_name: str | None) -> Any:
    """The env as the ledger stores it, from a Docker build context (or a prebuilt image);
    every problem raised at once, as one UserError."""
    from agent_env.bundles.model import BundleFile, EnvEntry
    from agent_env.bundles.parse import _CARD, _sha256, collect_files
    from agent_env.errors import UserError

    if context is None and dockerfile is not None:
        context = dockerfile.parent
    problems: list[str] = []
    files: list[BundleFile] = []
    if context is not None:
        if not context.is_dir():
            raise UserError(f"--context {context}: not a folder")
        named = "Dockerfile"
        if dockerfile is not None and dockerfile.resolve().is_relative_to(context.resolve()):
            named = dockerfile.resolve().relative_to(context.resolve()).as_posix()
        files = collect_files(context, str(context), problems, build_context=True,
                              dockerfile=named)
        if dockerfile is not None:
            root, full = context.resolve(), dockerfile.resolve()
            if not full.is_relative_to(root):
                raise UserError(f"--dockerfile {dockerfile} is outside --context {context}: "
                                "put it in the build context")
            if not full.is_file():
                raise UserError(f"--dockerfile {dockerfile}: no such file")
            relative = full.relative_to(root).as_posix()
            if relative != "Dockerfile":  # the build reads ./Dockerfile: store it there
                stat = full.stat()
                files = [f for f in files if f.path != "Dockerfile"]
                files.append(BundleFile("Dockerfile", full, _sha256(full), stat.st_size,
                                        0o644))
        if not any(f.path == "Dockerfile" for f in files):
            problems.append(f"{context}: has no Dockerfile (give --dockerfile)")
    elif not image_ref:
        raise UserError("give --context DIR (a Docker build context) or --image-ref IMAGE")
    if problems:
        raise UserError("; ".join(problems))
    name = environment_name
    if not name:
        cards = {m for f in files if f.path.endswith(".py")
                 for m in _CARD.findall(f.source.read_text(encoding="utf-8", errors="replace"))}
        if len(cards) == 1:
            name = cards.pop()
    return EnvEntry(env_id.rsplit("/", 1)[-1], env_id, env_type, f"env {env_id}",
                    context or Path("."), tuple(sorted(files, key=lambda f: f.path)),
                    image_ref, name)


def put_env(env_id: str, env_type: str, context: Path | None, dockerfile: Path | None,
            image_ref: str | None, environment_name: str | None) -> list[Any]:
    """Store a build context as the next version of env ``env_id`` of ``env_type`` (unchanged:
    the same version); returns the ledger lines."""
    from agent_env.bundles.ledger import Ledger
    from agent_env.errors import UserError
    from agent_env.runtime import current

    if not env_id.strip() or any(c.isspace() for c in env_id):
        raise UserError(f"--id {env_id!r}: an env id has no spaces")
    entry = env_entry(env_id, env_type, context, dockerfile, image_ref, environment_name)
    ledger = Ledger(current().versioned_store, current().object_store)
    ledger.write_files_entity("envs", entry)
    return list(ledger.lines)


def put_settings_env(env_id: str, env_type: str, settings: dict[str, Any],
                     environment_name: str | None = None,
                     folder: Path | None = None) -> list[Any]:
    """Store an env made of settings (a ``multi`` env names its children; it has no build
    context), with ``folder``'s files when given (a ``website`` env's two build contexts), as
    the next version of ``env_id`` (unchanged: the same version); returns the ledger lines."""
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.model import EnvEntry
    from agent_env.bundles.parse import collect_files
    from agent_env.errors import UserError
    from agent_env.runtime import current

    if not env_id.strip() or any(c.isspace() for c in env_id):
        raise UserError(f"--id {env_id!r}: an env id has no spaces")
    problems: list[str] = []
    files = collect_files(folder, f"env {env_id}", problems) if folder is not None else []
    if problems:
        raise UserError("; ".join(problems))
    entry = EnvEntry(env_id.rsplit("/", 1)[-1], env_id, env_type, f"env {env_id}",
                     folder or Path("."), tuple(files), None, environment_name,
                     dict(settings))
    ledger = Ledger(current().versioned_store, current().object_store)
    ledger.write_files_entity("envs", entry)
    return list(ledger.lines)


def stored_env(env_id: str, version: int | None = None) -> Any:
    """The stored env ``env_id`` (the latest unless ``version``); a UserError naming the
    versions there are, or how to store one."""
    from agent_env.errors import UserError
    from agent_env.runtime import current

    record = current().versioned_store.get("envs", env_id, version)
    if record is None:
        latest = current().versioned_store.latest_version("envs", env_id) if version else 0
        if latest:
            raise UserError(f"env '{env_id}' has no version {version} (the latest is "
                            f"v{latest})")
        raise UserError(f"no env '{env_id}' is stored (agent-env env mcp-server put --id "
                        f"{env_id} --context DIR stores one)")
    return record

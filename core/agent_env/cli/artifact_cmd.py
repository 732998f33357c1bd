"""``agent-env artifact``: files and skills stored once, as versions, to use in many tasks.

``put`` goes through the same content-hash ledger a bundle's artifacts do: each file's bytes go
to the object store under ``blobs/sha256/<hex>`` (written once, shared), the record to the
versioned ``artifacts`` kind with the hash of its file table, so putting unchanged files again
reuses the latest version (``v1, unchanged``) and a change writes the next one with its reason.

``get --output-dir`` writes an artifact's files under that folder and nowhere else: every path
is checked before the first byte is written (no ``..``, no absolute path, no symlink in the
folder leading out), so a bad record writes nothing at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID, OUTPUT_DIR, VERSION
from agent_env.errors import UserError
from agent_env.plural import plural
from agent_env.tasks.artifacts import (
    CLI,
    ENVIRONMENT,
    ENVIRONMENT_UNIVERSE,
    FILE,
    FILE_UNIVERSE,
    SKILL,
    SKILL_FILE,
    UNIVERSE_METADATA,
    CliSpec,
    safe_targets,
)


@click.group("artifact")
def artifact() -> None:
    """Stored, versioned artifacts: file (put/get/list), file-artifact-universe, skill
    (put/get), cli (put/get), environment (put) and environment-universe
    (put/get/compatible-envs)."""


def _collect(paths: tuple[Path, ...]) -> list[Any]:
    """The files to store: a file as its name, a folder's files relative to the folder."""
    from agent_env.bundles.model import BundleFile
    from agent_env.bundles.parse import _sha256, collect_files

    files: dict[str, Any] = {}
    problems: list[str] = []
    for path in paths:
        if path.is_dir():
            found = collect_files(path, str(path), problems)
        elif path.is_file():
            stat = path.stat()
            found = [BundleFile(path.name, path, _sha256(path), stat.st_size,
                                0o755 if stat.st_mode & 0o111 else 0o644)]
        elif os.path.lexists(path):  # a device, FIFO or socket: never read (/dev/zero ends not)
            problems.append(f"{path}: not a regular file or folder (store a file's contents "
                            "as a file)")
            continue
        else:
            problems.append(f"{path}: no such file or folder")
            continue
        for item in found:
            if item.path in files:
                problems.append(f"two files would be stored as '{item.path}' "
                                f"({files[item.path].source} and {item.source})")
            files[item.path] = item
    if problems:
        raise UserError("; ".join(problems))
    if not files:
        raise UserError("no files to store (the folders given are empty)")
    return [files[name] for name in sorted(files)]


def _put(artifact_id: str, kind: str, files: list[Any],
         environment_name: str | None = None, cli: Any = None) -> None:
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.model import ArtifactEntry
    from agent_env.runtime import current

    if not artifact_id.strip() or any(c.isspace() for c in artifact_id):
        raise UserError(f"--id {artifact_id!r}: an artifact id has no spaces")
    entry = ArtifactEntry(artifact_id.rsplit("/", 1)[-1], artifact_id, kind,
                          f"artifact {artifact_id}", tuple(files), environment_name, cli)
    ledger = Ledger(current().versioned_store, current().object_store)
    ledger.write_files_entity("artifacts", entry)
    for line in ledger.lines:
        echo(line)


def _get(artifact_id: str, version: int | None, output_dir: Path, kind: str | None) -> None:
    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.runtime import current

    versioned = current().versioned_store
    record = versioned.get("artifacts", artifact_id, version)
    if record is None:
        at = f" version {version}" if version else ""
        raise UserError(f"no artifact '{artifact_id}'{at} is stored (agent-env artifact file "
                        "list shows them)")
    if kind is not None and record.body.get("type") != kind:
        raise UserError(f"artifact '{artifact_id}' is a {record.body.get('type')} artifact, "
                        f"not a {kind} (use: agent-env artifact file get)")
    targets = safe_targets(output_dir, list(record.body.get("files", {})))
    content = StoredArtifacts(versioned, current().object_store, {artifact_id: record.version}) \
        .load_now(artifact_id)
    for item in content.files:
        target = targets[item.path]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(item.data)
        os.chmod(target, item.mode)
    echo(f"artifact {artifact_id} v{content.version}: wrote "
         f"{plural(len(content.files), 'file')} to {output_dir}")


def _get_command(group: click.Group, kind: str | None, summary: str, where: str) -> None:
    """Give ``group`` its ``get --id ID [--version N] --output-dir DIR``: the artifact's files
    written under DIR (of type ``kind``; None: any)."""

    @group.command("get", help=summary)
    @click.option("--id", "artifact_id", type=ENTITY_ID, required=True)
    @click.option("--version", type=VERSION, help="A version (default: the latest).")
    @click.option("--output-dir", required=True, type=OUTPUT_DIR, help=where)
    def get(artifact_id: str, version: int | None, output_dir: Path) -> None:
        _get(artifact_id, version, output_dir, kind)


# -- file -----------------------------------------------------------------------------------------


@artifact.group("file")
def file_group() -> None:
    """File artifacts: one file or a folder of files (verifier scripts, data)."""


@file_group.command("put")
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True,
              help="The artifact's id.")
@click.argument("paths", nargs=-1, required=True,
                type=click.Path(path_type=Path, exists=False))
def file_put(artifact_id: str, paths: tuple[Path, ...]) -> None:
    """Store PATHS (files, or folders' files) as the next version of artifact ID."""

    files = _collect(paths)
    _put(artifact_id, FILE if len(files) == 1 else FILE_UNIVERSE, files)


_get_command(file_group, None, "Write a stored artifact's files under --output-dir.",
             "Write the files here (nothing is written outside it).")


@file_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def file_list(as_json: bool) -> None:
    """Every stored artifact: id, latest version, type, files."""
    from agent_env.runtime import current

    store = current().versioned_store
    rows: list[dict[str, Any]] = []
    for artifact_id in store.list_ids("artifacts"):
        record = store.get("artifacts", artifact_id)
        if record is not None:
            rows.append({"id": record.id, "version": record.version,
                         "type": record.body.get("type"), "content_hash": record.content_hash,
                         "files": sorted(record.body.get("files", {}))})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        echo("No artifacts are stored (agent-env artifact file put --id ID PATH stores "
                   "one).")
    for row in rows:
        echo(f"{row['id']}  v{row['version']}  {row['type']}  "
             f"{plural(len(row['files']), 'file')}")


# -- file-artifact-universe (the reference's names for a folder of files) ------------------------


@artifact.group("file-artifact-universe")
def universe_files_group() -> None:
    """File artifact universes: many files stored as one artifact, each under its path."""


@universe_files_group.command("put")
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True, help="The universe's id.")
@click.option("--file-artifact", "file_artifacts", multiple=True, required=True,
              metavar="ID[:VERSION]", help="A stored file artifact to include under its file "
              "name (default: its latest version); repeatable.")
def universe_files_put(artifact_id: str, file_artifacts: tuple[str, ...]) -> None:
    """Store stored file artifacts together as the next version of universe ID."""

    files: dict[str, Any] = {}
    for ref in file_artifacts:
        record = _stored_record(ref, "--file-artifact")
        if record.body.get("type") not in (FILE, FILE_UNIVERSE):
            raise UserError(f"--file-artifact {ref}: a {record.body.get('type')} artifact, not "
                            "a file artifact")
        for path, meta in sorted(record.body.get("files", {}).items()):
            if path in files:
                raise UserError(f"--file-artifact {ref}: '{path}' is also a file of "
                                f"{files[path][0]} (a universe's files need paths of their "
                                "own)")
            files[path] = (ref, meta)
    objects = _objects()
    _put(artifact_id, FILE_UNIVERSE,
         [_stored_file(path, meta, objects) for path, (_, meta) in sorted(files.items())])


@universe_files_group.command("put-bundled")
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True, help="The universe's id.")
@click.option("--file-dir", required=True, type=click.Path(path_type=Path, file_okay=False,
                                                           exists=True),
              help="Every file under it is stored, under its path relative to it.")
@click.option("--prefix-url", help="Refused: files are stored by content in the object store.")
def universe_files_put_bundled(artifact_id: str, file_dir: Path, prefix_url: str | None) -> None:
    """Store every file under --file-dir as the next version of universe ID."""

    if prefix_url:
        raise UserError("--prefix-url is not supported here: an artifact's files are stored "
                        "once by their content (blobs/sha256/...) in the object store; leave "
                        "it out")
    _put(artifact_id, FILE_UNIVERSE, _collect((file_dir,)))


_get_command(universe_files_group, FILE_UNIVERSE, "Write a stored universe's files under "
             "--output-dir.", "Write the files here (nothing is written outside it).")


@universe_files_group.command("list")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="At most this many, most recently stored first.")
@click.option("--batch-id", help="Refused: runs here do not make universes per batch.")
def universe_files_list(limit: int, batch_id: str | None) -> None:
    """The stored file artifact universes, most recently stored first."""
    from agent_env.runtime import current

    if batch_id:
        raise UserError(_NO_BATCHES)
    store = current().versioned_store
    found = [r for r in (store.get("artifacts", i) for i in store.list_ids("artifacts"))
             if r is not None and r.body.get("type") == FILE_UNIVERSE]
    found.sort(key=lambda r: (r.created_at_utc, r.id), reverse=True)
    if not found:
        echo("No file artifact universes are stored (agent-env artifact "
             "file-artifact-universe put-bundled --id ID --file-dir DIR stores one).")
    for record in found[:limit]:
        echo(f"  {record.id} v{record.version}  files={len(record.body.get('files', {}))}")


@universe_files_group.command("get-many")
@click.option("--id", "artifact_ids", multiple=True, type=ENTITY_ID,
              help="A universe (repeatable); its files go under a folder named after it.")
@click.option("--batch-id", help="Refused: runs here do not make universes per batch.")
@click.option("--output-dir", required=True, type=OUTPUT_DIR,
              help="Each universe's files go under <output-dir>/<its id>.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="Files read from the object store at once.")
def universe_files_get_many(artifact_ids: tuple[str, ...], batch_id: str | None,
                            output_dir: Path, concurrency: int) -> None:
    """Write many universes' files at once, each under a folder named after its id."""
    from concurrent.futures import ThreadPoolExecutor


    if batch_id:
        raise UserError(_NO_BATCHES)
    if not artifact_ids:
        raise UserError("give --id ID (repeatable): the universes to write")
    jobs: list[tuple[Path, dict[str, Any]]] = []
    for artifact_id in dict.fromkeys(artifact_ids):
        record = _stored_record(artifact_id, "--id")
        if record.body.get("type") != FILE_UNIVERSE:
            raise UserError(f"--id {artifact_id}: a {record.body.get('type')} artifact, not a "
                            "file artifact universe")
        folder = output_dir / _folder_name(artifact_id)
        table = record.body.get("files", {})
        targets = safe_targets(folder, list(table))
        jobs += [(targets[path], meta) for path, meta in sorted(table.items())]
    objects = _objects()

    def write(job: tuple[Path, dict[str, Any]]) -> int:
        target, meta = job
        data = objects.get(str(meta["key"]))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, int(meta.get("mode", 0o644)))
        return len(data)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for done, size in enumerate(pool.map(write, jobs), 1):
            echo(f"  [{done}/{len(jobs)}] {jobs[done - 1][0].relative_to(output_dir)} "
                 f"({size} bytes)")
    echo(f"Wrote {plural(len(jobs), 'file')} of {plural(len(set(artifact_ids)), 'universe')} "
         f"to {output_dir}")


_NO_BATCHES = ("--batch-id is not supported here: runs do not make file artifact universes per "
               "batch (collect_artifacts keeps what it collects with the run's record); name the "
               "universes with --id")


def _folder_name(artifact_id: str) -> str:
    """A universe's folder under get-many's output: its id, with ``/`` and ``@`` made safe."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", artifact_id).strip("._") or "universe"


def _stored_record(ref: str, option: str) -> Any:
    """The stored artifact ``ID[:VERSION]`` names; UserError naming ``option`` otherwise."""
    from agent_env.runtime import current

    ref_id, _, ref_version = ref.partition(":")
    if ref_version and not ref_version.isdigit():
        raise UserError(f"{option} {ref}: ID or ID:VERSION (a number)")
    record = current().versioned_store.get("artifacts", ref_id,
                                           int(ref_version) if ref_version else None)
    if record is None:
        raise UserError(f"{option} {ref}: no artifact '{ref}' is stored")
    return record


def _objects() -> Any:
    from agent_env.runtime import current

    return current().object_store


# -- cli ------------------------------------------------------------------------------------------


@artifact.group("cli")
def cli_group() -> None:
    """CLI artifacts: a command's files, installed into an agent by load_artifact."""


@cli_group.command("put")
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True, help="The artifact's id.")
@click.option("--cli-dir", required=True, type=click.Path(path_type=Path, file_okay=False,
                                                          exists=True),
              help="The command's folder (every file under it is stored).")
@click.option("--entrypoint", required=True,
              help="The file to run, as a path in --cli-dir (e.g. bin/slack).")
@click.option("--command-name", required=True,
              help="What it is installed as (/opt/cli/<command-name>/ in the agent).")
@click.option("--env-id", help="The env it was made for (kept with it).")
@click.option("--env-version", type=VERSION, help="That env's version (kept with it).")
def cli_put(artifact_id: str, cli_dir: Path, entrypoint: str, command_name: str,
            env_id: str | None, env_version: int | None) -> None:
    """Store a command's folder as the next version of CLI artifact ID."""

    files = _collect((cli_dir,))
    spec = CliSpec(command_name, entrypoint, env_id, env_version)
    problems = spec.problems(f.path for f in files)
    if problems:
        raise UserError(f"--cli-dir {cli_dir}: {'; '.join(problems)}")
    _put(artifact_id, CLI, files, cli=spec)


_get_command(cli_group, CLI, "Write a stored CLI artifact's files under --output-dir.",
             "Write the command's files here (nothing is written outside it).")


# -- skill ----------------------------------------------------------------------------------------


@artifact.group("skill")
def skill_group() -> None:
    """Skill artifacts: a folder with a SKILL.md (and what it refers to)."""


@skill_group.command("put")
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True,
              help="The skill's id.")
@click.option("--skill-dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The skill's folder (it holds SKILL.md).")
def skill_put(artifact_id: str, skill_dir: Path) -> None:
    """Store a skill folder as the next version of artifact ID."""
    if not (skill_dir / SKILL_FILE).is_file():
        raise UserError(f"--skill-dir {skill_dir}: a skill folder holds a {SKILL_FILE}")
    _put(artifact_id, SKILL, _collect((skill_dir,)))


_get_command(skill_group, SKILL, "Write a stored skill's files under --output-dir.",
             "Write the skill's files here (nothing is written outside it).")


# -- environment data -----------------------------------------------------------------------------


@artifact.group("environment")
def environment_group() -> None:
    """Environment artifacts: one file that seeds the env server of its environment name."""


@environment_group.command("put")
@click.argument("filepath", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True, help="The artifact's id.")
@click.option("--description", required=True, help="What the data is.")
@click.option("--environment-name", required=True,
              help="The env server it seeds (its environment name).")
def environment_put(filepath: Path, artifact_id: str, description: str,
                    environment_name: str) -> None:
    """Store FILEPATH as the data of the env server ENVIRONMENT_NAME (next version of ID)."""

    if not environment_name.strip() or environment_name != environment_name.strip():
        raise UserError(f"--environment-name {environment_name!r}: a name without "
                        "surrounding spaces")
    _put(artifact_id, ENVIRONMENT, _collect((filepath,)), environment_name)


@artifact.group("environment-universe")
def universe_group() -> None:
    """Environment universes: data for several env servers at once, by environment name."""


@universe_group.command("put")
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True, help="The universe's id.")
@click.option("--environment-artifact", "environment_artifacts", multiple=True, required=True,
              metavar="ID[:VERSION]", help="A stored environment artifact (default: its latest "
              "version); repeatable, one per environment name.")
@click.option("--metadata", "metadata_entries", multiple=True, metavar="KEY=PATH",
              help="A file kept with the universe as metadata/KEY; repeatable.")
def universe_put(artifact_id: str, environment_artifacts: tuple[str, ...],
                 metadata_entries: tuple[str, ...]) -> None:
    """Store the environment artifacts (and metadata files) as the next version of universe
    ID: each under <environment_name>/, the layout environment-universe get writes."""
    from agent_env.bundles.model import BundleFile
    from agent_env.bundles.parse import _sha256

    files: list[Any] = []
    names: dict[str, str] = {}
    objects = _objects()
    for ref in environment_artifacts:
        record = _stored_record(ref, "--environment-artifact")
        name = record.body.get("environment_name")
        if record.body.get("type") != ENVIRONMENT or not name:
            raise UserError(f"--environment-artifact {ref}: a {record.body.get('type')} "
                            "artifact, not an environment artifact (agent-env artifact "
                            "environment put)")
        if name in names:
            raise UserError(f"--environment-artifact {ref}: environment '{name}' is already "
                            f"given by {names[name]}")
        names[name] = ref
        (path, meta), = record.body["files"].items()
        files.append(_stored_file(f"{name}/{path.rpartition('/')[2]}", meta, objects))
    keys: set[str] = set()
    for entry in metadata_entries:
        key, sep, file_path = entry.partition("=")
        if not sep or not key or not file_path:
            raise UserError(f"--metadata {entry!r}: KEY=PATH")
        if key in keys:
            raise UserError(f"--metadata: key '{key}' is given twice")
        keys.add(key)
        source = Path(file_path)
        if not source.is_file():
            raise UserError(f"--metadata {entry}: no such file {file_path}")
        stat = source.stat()
        files.append(BundleFile(f"{UNIVERSE_METADATA}/{key}/{source.name}", source,
                                _sha256(source), stat.st_size, 0o644))
    _put(artifact_id, ENVIRONMENT_UNIVERSE, sorted(files, key=lambda f: f.path))


def _stored_file(path: str, meta: dict[str, Any], objects: Any) -> Any:
    """A file the stores hold as a ledger entry's file: the ledger finds its blob already
    stored and never reads ``source``, so nothing is copied."""
    from agent_env.bundles.model import BundleFile

    key = str(meta["key"])
    if not objects.exists(key):
        raise UserError(f"the object store has lost {key}; store the environment artifact "
                        "again")
    return BundleFile(path, Path(key), str(meta["sha256"]), int(meta.get("size", 0)),
                      int(meta.get("mode", 0o644)))


_get_command(universe_group, ENVIRONMENT_UNIVERSE, "Write a stored universe's files under "
             "--output-dir, a folder per environment.",
             "Write <environment_name>/<file> and metadata/<key>/<file> here.")


@universe_group.command("compatible-envs")
@click.option("--id", "artifact_id", type=ENTITY_ID, required=True)
def universe_compatible(artifact_id: str) -> None:
    """Which stored envs serve every environment of the universe (by environment name)."""
    from agent_env.bundles.entities import stored_artifacts
    from agent_env.env_types import load_env_source
    from agent_env.runtime import current

    try:
        universe = stored_artifacts().load_now(artifact_id)
    except LookupError as exc:
        raise UserError(str(exc)) from None
    wanted = set(universe.environments())
    types = current().host.registry("env_type")
    rows = []
    for env_id in current().versioned_store.list_ids("envs"):
        source = load_env_source(None, env_id)
        env_type = types.get(source.type)
        if env_type is None:
            continue
        served = set(env_type.served_names(source, None))
        if served & wanted:
            rows.append((env_id, source.version, sorted(wanted - served)))
    if not rows:
        echo(f"No stored env serves any environment of {artifact_id} "
             f"({', '.join(sorted(wanted))})")
    for env_id, version, missing in rows:
        verdict = "COMPATIBLE" if not missing else f"PARTIAL (no {', '.join(missing)})"
        echo(f"  env={env_id} v{version}: {verdict}")

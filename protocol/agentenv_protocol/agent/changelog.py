"""snapshot/v1's changelog: an agent's work kept as numbered increments while it works, and
replayed into another agent up to any point.

Why: a snapshot is one point in time, taken when a turn is over. RL and debugging want every
point: replay an agent's files and conversation up to its fifth tool call and let another
policy go on from there. The agent writes each increment itself, through a namespace grant
(:class:`..transfer.NamespaceWriter`), so only the grant crosses the runtime's connection.

- enable, ``POST /ext/snapshot/changelog {write_namespace: WriteNamespaceGrant, roots?}``:
  from now on the agent writes an increment ``000001.tar``, ``000002.tar``... under the
  namespace after each tool call its code marks (``await request.checkpoint()``) and at the end
  of each turn, whenever something changed. ``roots`` are folders inside the agent's workspace
  (default ``["."]``, the whole workspace; none for an agent that keeps no workspace)
  -> ``{roots}``. Enabling again is 409.
- apply, ``PUT /ext/snapshot/changelog {increments: [{sequence, object: ReadObject}],
  resume_conversation = false, target_context_id?}``: reads every increment (size and sha256
  checked) and checks every member before anything is written, then applies them in sequence
  order: files written, deleted files removed; with ``resume_conversation`` the increments'
  events become a context (``target_context_id``, else a new one) -> ``{count, context_id?}``.

An increment is an uncommitted tar: ``changelog.json`` (``{sequence, context_id, reason,
format, events, deleted}``: the trajectory events appended since the last increment and the
workspace paths removed) and ``files/<path>`` for every file added or changed (by size and
modification time) under the roots. A write that fails (grant expired, namespace full) stops
the changelog, since a gap would make every later increment wrong; the agent's turn does not
fail for it, and ``GET /ext/snapshot/changelog`` (``{enabled, roots, sequence, error}``) says
how far it got and why it stopped.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import tarfile
import uuid
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import AgentEnvError
from ..transfer import (
    NamespaceWriter,
    inside_path,
    read_object,
    read_object_from_wire,
    write_namespace_from_wire,
)
from .extensions import bad_request as _bad
from .trajectory import TrajectoryNotFound, TrajectoryStore

CHANGELOG_PATH = "/ext/snapshot/changelog"
MANIFEST = "changelog.json"
FILES = "files/"
FORMAT = "agentenv-changelog/1"

log = logging.getLogger("agentenv.agent.changelog")

#: path -> (size, mtime_ns) of the files under the roots, relative to the workspace
Index = dict[str, tuple[int, int]]


def increment_name(sequence: int) -> str:
    """``000042.tar``: the object name of increment ``sequence``."""
    return f"{sequence:06d}.tar"


class ChangelogState:
    """The changelog of one agent server: off until enabled, then one writer for its life."""

    def __init__(self, trajectories: TrajectoryStore, workspace: str | None,
                 running: Any) -> None:
        self.trajectories = trajectories
        self.workspace = Path(workspace) if workspace else None
        #: ``running(context_id) -> bool``: whether a turn of the context is still going.
        self.running = running
        self.writer: NamespaceWriter | None = None
        self.roots: list[str] = []
        self.sequence = 0
        self.error: str | None = None
        self._index: Index = {}
        self._logged: dict[str, int] = {}  # context -> how many of its events are logged
        self._lock = asyncio.Lock()

    # -- enable ------------------------------------------------------------------------------

    async def enable(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise _bad("body must be a JSON object")
        unknown = sorted(set(body) - {"write_namespace", "roots"})
        if unknown:
            raise _bad(f"unknown field(s): {', '.join(unknown)}")
        writer = NamespaceWriter(write_namespace_from_wire(body.get("write_namespace")))
        writer.check()  # an expired or foreign grant is refused now, not at the first increment
        roots = body.get("roots")
        if roots is None:
            roots = ["."] if self.workspace is not None else []
        if not isinstance(roots, list) or not all(
                r == "." or inside_path(r) for r in roots):
            raise _bad('roots must be a list of folders inside the workspace ("." for all of '
                       "it)")
        if roots and self.workspace is None:
            raise _bad("this agent keeps no workspace (its class sets no workspace folder), "
                       "so it has no roots to log; enable with roots = []")
        async with self._lock:
            if self.writer is not None:
                raise _bad("the changelog is already enabled on this agent", code="conflict",
                           status=409)
            self.roots = list(dict.fromkeys(roots))
            self._index = await asyncio.to_thread(self._scan)
            self._logged = self.trajectories.event_counts()
            self.writer, self.sequence, self.error = writer, 0, None
        return {"roots": self.roots}

    # -- increments --------------------------------------------------------------------------

    def _scan(self) -> Index:
        """(size, mtime_ns) of every regular file under the roots (links left out)."""
        index: Index = {}
        if self.workspace is None:
            return index
        for root in self.roots:
            top = self.workspace / root
            if top.is_symlink() or not top.is_dir():  # a link would log what lies outside
                continue
            for folder, dirs, files in os.walk(top):
                dirs.sort()
                for name in files:
                    path = Path(folder, name)
                    if path.is_symlink() or not path.is_file():
                        continue
                    st = path.stat()
                    index[path.relative_to(self.workspace).as_posix()] = (st.st_size,
                                                                         st.st_mtime_ns)
        return index

    def _pack(self, manifest: dict[str, Any], changed: list[str]) -> bytes:
        assert self.workspace is not None or not changed
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            data = json.dumps(manifest, default=str).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            for rel in changed:
                path = self.workspace / rel  # type: ignore[operator]
                if path.is_file():  # removed since the scan: the next increment says so
                    tar.add(path, arcname=FILES + rel, recursive=False)
        return out.getvalue()

    async def checkpoint(self, context_id: str, reason: str) -> int | None:
        """Write an increment of what changed since the last one; its sequence, or None when
        nothing changed or the changelog is off. Never raises: a failed write stops the log."""
        if self.writer is None or self.error is not None:
            return None
        async with self._lock:
            try:
                return await self._checkpoint(context_id, reason)
            except Exception as exc:  # a turn must not fail for its log; the card says why
                self.error = f"increment {self.sequence + 1} was not written: {exc}"
                log.warning("changelog stopped: %s", self.error)
                return None

    async def _checkpoint(self, context_id: str, reason: str) -> int | None:
        assert self.writer is not None
        try:
            state = self.trajectories.export_context(context_id)
        except TrajectoryNotFound:
            state = {"format": None, "events": []}
        start = self._logged.get(context_id, 0)
        if start > len(state["events"]):  # the context was loaded over since: log it whole
            start = 0
        events = state["events"][start:]
        index = await asyncio.to_thread(self._scan)
        changed = sorted(p for p, sig in index.items() if self._index.get(p) != sig)
        deleted = sorted(set(self._index) - set(index))
        if not (events or changed or deleted):
            return None
        sequence = self.sequence + 1
        manifest = {"format": FORMAT, "sequence": sequence, "context_id": context_id,
                    "reason": reason, "trajectory_format": state.get("format"),
                    "events": events, "deleted": deleted}
        data = await asyncio.to_thread(self._pack, manifest, changed)
        await self.writer.write(increment_name(sequence), data, media_type="application/x-tar")
        self.sequence, self._index = sequence, index
        self._logged[context_id] = len(state["events"])
        return sequence

    # -- apply -------------------------------------------------------------------------------

    async def apply(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise _bad("body must be a JSON object")
        unknown = sorted(set(body) - {"increments", "resume_conversation", "target_context_id"})
        if unknown:
            raise _bad(f"unknown field(s): {', '.join(unknown)}")
        increments = body.get("increments")
        if not isinstance(increments, list):
            raise _bad("increments must be a list of {sequence, object}")
        resume = body.get("resume_conversation", False)
        if not isinstance(resume, bool):
            raise _bad("resume_conversation must be true or false")
        target = body.get("target_context_id")
        if target is not None and (not isinstance(target, str) or not target):
            raise _bad("target_context_id must be a non-empty string")
        grants: dict[int, Any] = {}
        for i, item in enumerate(increments):
            seq = item.get("sequence") if isinstance(item, Mapping) else None
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                raise _bad(f"increments[{i}].sequence must be a whole number from 1")
            if seq in grants:
                raise _bad(f"increment {seq} is given twice")
            grants[seq] = read_object_from_wire(item.get("object"))
        context_id = (target or uuid.uuid4().hex) if resume else None
        if context_id is not None and self.running(context_id):
            raise _bad(f"context {context_id!r} has a turn running", code="conflict",
                       status=409)
        # everything read and checked before anything is written
        parsed = [(seq, _parse(seq, await read_object(grants[seq]))) for seq in sorted(grants)]
        if any(files or deleted for _, (_, files, deleted) in parsed) and self.workspace is None:
            raise _bad("the increments change files and this agent keeps no workspace")
        if self.workspace is not None:
            await asyncio.to_thread(_write_all, self.workspace, [p for _, p in parsed])
        out: dict[str, Any] = {"count": len(parsed)}
        if context_id is not None:
            events = [e for _, (manifest, _, _) in parsed for e in manifest["events"]]
            fmt = next((m.get("trajectory_format") for _, (m, _, _) in parsed
                        if m.get("trajectory_format")), None)
            try:
                self.trajectories.import_context(context_id, fmt, events)
            except ValueError as exc:
                raise _bad(str(exc), code="conflict", status=409) from None
            out["context_id"] = context_id
        return out

    def status(self) -> dict[str, Any]:
        """``GET /ext/snapshot/changelog``: whether it is on, how far it got, why it stopped."""
        return {"enabled": self.writer is not None, "roots": self.roots,
                "sequence": self.sequence, "error": self.error}

    @staticmethod
    def card_params() -> dict[str, Any]:
        """What snapshot/v1's card entry says of the changelog."""
        enable = {"write_namespace": "WriteNamespaceGrant", "roots?": ["string"]}
        apply = {"increments": [{"sequence": "integer", "object": "ReadObject"}],
                 "resume_conversation?": "boolean", "target_context_id?": "string"}
        status = {"enabled": "boolean", "roots": ["string"], "sequence": "integer",
                  "error": "string|null"}
        return {
            "enable_changelog": {"method": "POST", "endpoint": CHANGELOG_PATH,
                                 "request": enable, "response": {"roots": ["string"]}},
            "apply_changelog": {"method": "PUT", "endpoint": CHANGELOG_PATH, "request": apply,
                                "response": {"count": "integer", "context_id?": "string"}},
            "changelog_status": {"method": "GET", "endpoint": CHANGELOG_PATH,
                                 "response": status},
        }


Parsed = tuple[dict[str, Any], dict[str, bytes], list[str]]


def _parse(sequence: int, data: bytes) -> Parsed:
    """An increment's manifest, files and deletions, every name checked; a 400 naming it."""
    where = f"increment {sequence}"
    files: dict[str, bytes] = {}
    manifest: Any = None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar.getmembers():
                if member.isdir():
                    continue
                if not member.isfile():
                    raise _bad(f"{where} holds {member.name!r}, which is not a plain file")
                content = tar.extractfile(member)
                raw = content.read() if content is not None else b""
                if member.name == MANIFEST:
                    manifest = json.loads(raw)
                    continue
                rel = member.name.removeprefix(FILES)
                if not member.name.startswith(FILES) or not inside_path(rel):
                    raise _bad(f"{where} holds {member.name!r}, which is not a file inside "
                               "the workspace")
                files[rel] = raw
    except tarfile.TarError as exc:
        raise _bad(f"{where} is not a tar: {exc}") from None
    except (ValueError, UnicodeDecodeError):
        raise _bad(f"{where}'s {MANIFEST} is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("sequence") != sequence \
            or not isinstance(manifest.get("events"), list) \
            or not isinstance(manifest.get("deleted"), list):
        raise _bad(f"{where} is not a changelog increment (its {MANIFEST} is missing or names "
                   "another sequence)")
    deleted = manifest["deleted"]
    if not all(inside_path(p) for p in deleted):
        raise _bad(f"{where} deletes a path outside the workspace")
    return manifest, files, deleted


def _target(workspace: Path, rel: str) -> Path:
    """Where ``rel`` goes in the workspace; a folder on the way that is a link or a file, or a
    target that is a folder, is refused, so nothing is written through a link the agent left
    and no apply stops halfway on a clash it could have seen."""
    path = workspace
    for part in PurePosixPath(rel).parts[:-1]:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise _bad(f"{rel!r} goes through a link or a file in the workspace; nothing was "
                       "written")
    path = path / PurePosixPath(rel).name
    if path.is_dir() and not path.is_symlink():
        raise _bad(f"{rel!r} is a folder in the workspace; nothing was written")
    return path


def _write_all(workspace: Path, increments: list[Parsed]) -> None:
    targets = {rel: _target(workspace, rel) for _, files, deleted in increments
               for rel in [*files, *deleted]}  # all checked before the first write
    try:
        for _, files, deleted in increments:
            for rel, data in files.items():
                path = targets[rel]
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.is_symlink():  # never write through a link the agent left
                    path.unlink()
                path.write_bytes(data)
            for rel in deleted:
                path = targets[rel]
                if path.is_symlink() or path.is_file():
                    path.unlink()
    except OSError as exc:  # a disk full or a clash made by an earlier increment
        raise AgentEnvError("internal_error", f"applying the changelog failed part way: {exc}",
                            status=500) from None

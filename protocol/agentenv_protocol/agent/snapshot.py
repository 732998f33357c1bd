"""snapshot/v1: save a context's state through object grants, and load it into another agent.

Why: an agent's work is its conversation's trajectory and the files it made. Saved, they let a
run resume from a warmed state, fork several agents from one, or keep what an agent did beside
its score. The bytes go straight between the agent and the store through grants
(:mod:`..transfer`); only the grants cross the runtime's connection.

- save, ``POST /ext/snapshot {context_id, objects: {trajectory: WriteObject, workspace?:
  WriteObject}}``: uploads the context's trajectory (JSON ``{format, events, session?}``:
  ``session``, base64, is what the agent keeps of the context beyond its events, a CLI's
  session files, when it keeps any: ``AgentEnvAgent.save_session``) and, when asked
  and the agent keeps one (``workspace`` on its class: a folder), its workspace as a tar
  (regular files and folders; links and devices are left out) -> ``{context_id, objects:
  {trajectory: {size_bytes, sha256}, workspace?: {...}}}``;
- load, ``PUT /ext/snapshot {objects: {trajectory: ReadObject, workspace?: ReadObject},
  target_context_id?}``: reads them (size and sha256 checked), starts the context over from the
  saved events (a new id unless one is given), gives the agent its ``session`` back
  (``load_session``) and unpacks the workspace into the agent's folder,
  refusing a member that is absolute, climbs out (``..``) or is not a plain file or folder
  before anything is written -> ``{context_id}``.

Refusals: an unknown context 404, a context with a turn running 409, a workspace asked of an
agent without one 400, and every transfer code.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import tarfile
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ..transfer import (
    read_object,
    read_object_from_wire,
    write_object,
    write_object_from_wire,
)
from .extensions import bad_request as _bad
from .trajectory import TrajectoryNotFound, TrajectoryStore

SNAPSHOT_CONFIG_PATH = "/ext/snapshot"
OBJECTS = ("trajectory", "workspace")


def _objects(body: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise _bad("body must be a JSON object")
    objects = body.get("objects")
    if not isinstance(objects, Mapping) or "trajectory" not in objects:
        raise _bad("objects must hold a trajectory grant (and may hold a workspace one)")
    unknown = sorted(set(objects) - set(allowed))
    if unknown:
        raise _bad(f"unknown object(s): {', '.join(unknown)}")
    return objects


def _workspace(folder: str | None) -> Path:
    if not folder:
        raise _bad("this agent keeps no workspace (its class sets no workspace folder)")
    return Path(folder)


class SnapshotState:
    """snapshot/v1 for one agent server: its trajectories and its workspace folder."""

    def __init__(self, trajectories: TrajectoryStore, workspace: str | None,
                 running: Any,
                 save_session: Callable[[str], Awaitable[bytes | None]] | None = None,
                 load_session: Callable[[str, bytes], Awaitable[None]] | None = None) -> None:
        self.trajectories = trajectories
        self.workspace = workspace
        #: ``running(context_id) -> bool``: whether a turn of the context is still going.
        self.running = running
        #: the agent's ``save_session`` / ``load_session`` (its state beyond the events)
        self.save_session = save_session
        self.load_session = load_session

    async def save(self, body: Any) -> dict[str, Any]:
        objects = _objects(body, OBJECTS)
        unknown = sorted(set(body) - {"context_id", "objects"})
        if unknown:
            raise _bad(f"unknown field(s): {', '.join(unknown)}")
        context_id = body.get("context_id")
        if not isinstance(context_id, str) or not context_id:
            raise _bad("context_id is required")
        if self.running(context_id):
            raise _bad(f"context {context_id!r} has a turn running; save it when it ends",
                       code="conflict", status=409)
        grants = {name: write_object_from_wire(objects[name]) for name in objects}
        try:
            state = self.trajectories.export_context(context_id)
        except TrajectoryNotFound as exc:
            raise _bad(str(exc), code="not_found", status=404) from None
        session = await self.save_session(context_id) if self.save_session else None
        if session is not None:
            state = {**state, "session": base64.b64encode(session).decode("ascii")}
        data = {"trajectory": json.dumps(state, default=str).encode()}
        if "workspace" in grants:
            data["workspace"] = await asyncio.to_thread(_pack, _workspace(self.workspace))
        uploaded = {}
        for name, grant in grants.items():
            done = await write_object(grant, data[name])
            uploaded[name] = {"size_bytes": done.size_bytes, "sha256": done.sha256}
        return {"context_id": context_id, "objects": uploaded}

    async def load(self, body: Any) -> dict[str, Any]:
        objects = _objects(body, OBJECTS)
        unknown = sorted(set(body) - {"objects", "target_context_id"})
        if unknown:
            raise _bad(f"unknown field(s): {', '.join(unknown)}")
        target = body.get("target_context_id") or uuid.uuid4().hex
        if not isinstance(target, str):
            raise _bad("target_context_id must be a string")
        if self.running(target):
            raise _bad(f"context {target!r} has a turn running", code="conflict", status=409)
        grants = {name: read_object_from_wire(objects[name]) for name in objects}
        folder = _workspace(self.workspace) if "workspace" in grants else None
        raw = {name: await read_object(grant) for name, grant in grants.items()}
        try:
            state = json.loads(raw["trajectory"])
            events, fmt = state["events"], state.get("format")
            if not isinstance(events, list) or not (fmt is None or isinstance(fmt, str)):
                raise ValueError(state)
            session = state.get("session")
            saved = None if session is None else base64.b64decode(session, validate=True)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, binascii.Error):
            raise _bad("the trajectory object is not a saved snapshot ({format, events})") \
                from None
        if saved is not None:
            if self.load_session is None:
                raise _bad("the snapshot holds a session and this agent keeps none")
            try:
                await self.load_session(target, saved)
            except ValueError as exc:
                raise _bad(f"the snapshot's session cannot be loaded: {exc}") from None
        if folder is not None:
            # checked whole before anything is written; file work off the event loop
            await asyncio.to_thread(_unpack, raw["workspace"], folder)
        try:
            self.trajectories.import_context(target, fmt, events)
        except ValueError as exc:
            raise _bad(str(exc), code="conflict", status=409) from None
        return {"context_id": target}

    @staticmethod
    def card_entry() -> dict[str, Any]:
        grant = {"trajectory": "WriteObject", "workspace?": "WriteObject"}
        return {
            "uri": "urn:agentenv:snapshot/v1",
            "description": "Save a context's trajectory and workspace through object grants, "
                           "and load them into a context.",
            "params": {
                "endpoint": SNAPSHOT_CONFIG_PATH,
                "objects": list(OBJECTS),
                "methods": {
                    "save": {"method": "POST", "endpoint": SNAPSHOT_CONFIG_PATH,
                             "request": {"context_id": "string", "objects": grant},
                             "response": {"context_id": "string", "objects": "object"}},
                    "load": {"method": "PUT", "endpoint": SNAPSHOT_CONFIG_PATH,
                             "request": {"objects": {"trajectory": "ReadObject",
                                                     "workspace?": "ReadObject"},
                                         "target_context_id?": "string"},
                             "response": {"context_id": "string"}},
                },
            },
        }


def _pack(folder: Path) -> bytes:
    """The folder's regular files and folders as an uncompressed tar (links left out)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                if path.is_symlink() or not (path.is_file() or path.is_dir()):
                    continue
                tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return out.getvalue()


def _unpack(data: bytes, folder: Path) -> None:
    """Extract a saved workspace into ``folder``; every member is checked first."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = tar.getmembers()
            for member in members:
                name = PurePosixPath(member.name)
                if name.is_absolute() or ".." in name.parts or not (member.isfile()
                                                                    or member.isdir()):
                    raise _bad(f"the workspace holds {member.name!r}, which is not a plain "
                               "file or folder inside it")
            folder.mkdir(parents=True, exist_ok=True)
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: the stdlib checks as well
                tar.extractall(folder, members=members, filter="data")
            else:
                tar.extractall(folder, members=members)  # every member was checked above
    except tarfile.TarError as exc:
        raise _bad(f"the workspace object is not a tar: {exc}") from None

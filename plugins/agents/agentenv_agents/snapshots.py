"""Agent snapshots from task steps (snapshot/v1): save a context into the run's object store,
load a saved one into a freshly deployed agent.

Why: an RL or eval run wants an agent to start from a warmed state (a conversation and the files
it made) rather than from nothing, and to keep that state beside the score. snapshot/v1 moves
the bytes straight between the agent and the store through signed URLs; the runtime only hands
out the grants and checks what arrived.

- save (``snapshot_agent_state``): each object gets a signed PUT URL under the step's prefix
  (``trajectory.json``, and ``workspace.tar`` unless the step leaves the workspace out); the
  agent uploads; the runtime reads each object back and checks the size and sha256 the agent
  reported. A mismatch removes what was written and fails the step.
- load (``deploy_agent``'s ``agent_snapshot_*``): from a snapshot step earlier in the task (its
  objects are already in the store) or from a stored files artifact holding ``trajectory.json``
  and maybe ``workspace.tar`` (staged in the store, removed after); each goes as a ``ReadObject``
  grant with its size and sha256, and the agent's conversation continues in the loaded context.

Both need an agent whose card lists snapshot/v1, an ``open`` agent (a sealed one cannot reach
the store) and a store that signs URLs (S3, GCS); otherwise the step fails naming what is
missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from agent_env.api import StepError
from agentenv_protocol.transfer import HttpGrant, ReadObject, WriteObject

from .object_forms import card_extension, expires_in, forget_staged, signed_url

GRANT_SECONDS = 900
#: The most bytes a save lets the agent write, per object.
MAX_BYTES = {"trajectory": 512 * 1024 * 1024, "workspace": 2 * 1024 * 1024 * 1024}
FILES = {"trajectory": "trajectory.json", "workspace": "workspace.tar"}
MEDIA = {"trajectory": "application/json", "workspace": "application/x-tar"}


@attrs.frozen
class SavedObject:
    key: str
    size_bytes: int
    sha256: str


@attrs.frozen
class SavedSnapshot:
    """What a save put in the store (the step's output keeps it)."""

    context_id: str
    objects: dict[str, SavedObject]

    def to_output(self) -> dict[str, Any]:
        return {"context_id": self.context_id,
                "objects": {name: attrs.asdict(obj) for name, obj in self.objects.items()}}


def require_snapshots(card: dict[str, Any], agent_name: str, open_agent: bool,
                      what: str) -> None:
    """StepError naming why the agent cannot ``what`` (save/load a snapshot), if it cannot."""
    if card_extension(card, "snapshot") is None:
        raise StepError(f"agent '{agent_name}' cannot {what} (its card has no snapshot/v1 "
                        "extension)")
    if not open_agent:
        raise StepError(f"agent '{agent_name}' cannot {what}: it is sealed and cannot reach "
                        'the object store; set network_policy = "open" on its deploy_agent step')


def _signed(store: Any, key: str, verb: str, media: str) -> str:
    url = signed_url(store, key, put=verb == "put", seconds=GRANT_SECONDS, content_type=media)
    if url is None:
        raise StepError("agent snapshots go through signed URLs and the run's object store "
                        "cannot sign them (use S3 or GCS)")
    return url


async def _call(http: Any, verb: str, url: str, body: dict[str, Any],
                agent_name: str) -> dict[str, Any]:
    import aiohttp

    try:
        async with http.request(verb, url, json=body,
                                timeout=aiohttp.ClientTimeout(total=GRANT_SECONDS)) as resp:
            text = await resp.text()
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise StepError(f"agent '{agent_name}': {verb} {url} failed: "
                        f"{type(exc).__name__}: {exc}") from None
    if status >= 300:
        raise StepError(f"agent '{agent_name}': {verb} {url} answered HTTP {status}: "
                        f"{text[:300]}")
    import json

    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise StepError(f"agent '{agent_name}': {verb} {url} answered no JSON object")
    return answer


async def save_snapshot(http: Any, agent_url: str, agent_name: str, card: dict[str, Any], *,
                        context_id: str, workspace: bool, store: Any, prefix: str,
                        open_agent: bool) -> SavedSnapshot:
    """POST the agent's ``/ext/snapshot``; the objects, checked, under ``prefix``."""
    require_snapshots(card, agent_name, open_agent, "save a snapshot")
    names = ["trajectory", "workspace"] if workspace else ["trajectory"]
    keys = {name: f"{prefix.rstrip('/')}/{FILES[name]}" for name in names}
    expires = expires_in(GRANT_SECONDS)
    grants = {name: WriteObject(MEDIA[name], MAX_BYTES[name], HttpGrant(
        "http_put", _signed(store, keys[name], "put", MEDIA[name]), expires)).to_wire()
        for name in names}
    try:
        answer = await _call(http, "POST", f"{agent_url}/ext/snapshot",
                             {"context_id": context_id, "objects": grants}, agent_name)
    except StepError as exc:
        # an agent failing halfway may have uploaded one object: keep no half snapshot
        await asyncio.to_thread(forget_staged, store, list(keys.values()))
        if workspace and "keeps no workspace" in str(exc):
            raise StepError(f"{exc} (set include_workspace = false on the "
                            "snapshot_agent_state step)") from None
        raise
    reported = answer.get("objects") if isinstance(answer.get("objects"), dict) else {}
    saved = {}
    for name in names:
        got = reported.get(name) or {}
        try:
            data = await asyncio.to_thread(store.get, keys[name])  # store calls block
        except Exception as exc:
            await asyncio.to_thread(forget_staged, store, list(keys.values()))
            raise StepError(f"agent '{agent_name}' saved no {name} object "
                            f"({type(exc).__name__}: {exc})") from None
        digest = hashlib.sha256(data).hexdigest()
        if got.get("size_bytes") != len(data) or got.get("sha256") != digest:
            await asyncio.to_thread(forget_staged, store, list(keys.values()))
            raise StepError(f"agent '{agent_name}': the stored {name} does not match the size "
                            "and sha256 the agent reported; nothing was kept")
        saved[name] = SavedObject(keys[name], len(data), digest)
    return SavedSnapshot(str(answer.get("context_id") or context_id), saved)


async def load_snapshot(http: Any, agent_url: str, agent_name: str, card: dict[str, Any], *,
                        objects: Mapping[str, SavedObject], target_context_id: str | None,
                        store: Any, open_agent: bool) -> str:
    """PUT the agent's ``/ext/snapshot`` with read grants for ``objects`` (in the store);
    the context it loaded into."""
    require_snapshots(card, agent_name, open_agent, "load a snapshot")
    if "trajectory" not in objects:
        raise StepError(f"the snapshot for agent '{agent_name}' holds no trajectory")
    expires = expires_in(GRANT_SECONDS)
    grants = {name: ReadObject(MEDIA[name], obj.size_bytes, HttpGrant(
        "http_get", _signed(store, obj.key, "get", MEDIA[name]), expires),
        size_bytes=obj.size_bytes, sha256=obj.sha256).to_wire()
        for name, obj in objects.items()}
    body: dict[str, Any] = {"objects": grants}
    if target_context_id:
        body["target_context_id"] = target_context_id
    answer = await _call(http, "PUT", f"{agent_url}/ext/snapshot", body, agent_name)
    context_id = answer.get("context_id")
    if not isinstance(context_id, str) or not context_id:
        raise StepError(f"agent '{agent_name}' loaded the snapshot but named no context")
    return context_id


def from_output(output: Any, step_id: str) -> dict[str, SavedObject]:
    """The objects the ``snapshot_agent_state`` step ``step_id`` recorded (its output)."""
    objects = (output or {}).get("objects") if isinstance(output, dict) else None
    if not isinstance(objects, dict) or "trajectory" not in objects:
        raise StepError(f"agent_snapshot_step '{step_id}' recorded no saved snapshot (is it a "
                        "snapshot_agent_state step?)")
    return {name: SavedObject(str(o["key"]), int(o["size_bytes"]), str(o["sha256"]))
            for name, o in objects.items() if name in FILES}


def stage_files(files: Mapping[str, bytes], store: Any, prefix: str,
                staged: list[str], artifact_id: str) -> dict[str, SavedObject]:
    """A snapshot artifact's files put in the store under ``prefix`` (blocking: a thread);
    the keys go to ``staged`` for removal after the load."""
    unknown = sorted(set(files) - set(FILES.values()))
    if FILES["trajectory"] not in files or unknown:
        raise StepError(f"snapshot artifact '{artifact_id}' must hold {FILES['trajectory']} "
                        f"and may hold {FILES['workspace']}"
                        + (f"; it also holds {', '.join(unknown)}" if unknown else ""))
    out = {}
    run = uuid.uuid4().hex[:12]
    for name, file in FILES.items():
        if file not in files:
            continue
        key = f"{prefix.rstrip('/')}/{run}/{file}"
        data = files[file]
        store.put(key, data, allow_overwrite=True)
        staged.append(key)
        out[name] = SavedObject(key, len(data), hashlib.sha256(data).hexdigest())
    return out

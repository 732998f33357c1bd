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

- changelog (``deploy_agent``'s ``enable_agent_changelog``): the agent gets a namespace grant
  (a signed POST policy of the run's store) under the step's prefix and writes increments
  ``000001.tar``... there as it works; after each prompt the runtime asks how far it got and a
  stopped changelog fails the prompt step, naming why.
- changelog apply (``agent_changelog_object_url``): the increments under a prefix (or those of
  an earlier ``deploy_agent`` step), optionally only those before a sequence, go as read grants
  and the agent's conversation continues from their events.

All need an agent whose card lists snapshot/v1, an ``open`` agent (a sealed one cannot reach
the store) and a store that signs URLs (S3, GCS; the changelog a store that signs POST
policies: S3); otherwise the step fails naming what is missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from agent_env.api import StepError, UnsupportedOperation
from agentenv_protocol.agent.changelog import CHANGELOG_PATH
from agentenv_protocol.transfer import HttpGrant, ReadObject, WriteNamespaceGrant, WriteObject

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


# -- the changelog ------------------------------------------------------------------------------

#: How much a changelog may hold: increments, bytes each, bytes in all.
CHANGELOG_MAX_OBJECTS = 100_000
CHANGELOG_MAX_OBJECT_BYTES = 256 * 1024 * 1024
CHANGELOG_MAX_TOTAL_BYTES = 8 * 1024 * 1024 * 1024
#: A changelog grant lasts as long as an agent may live.
CHANGELOG_GRANT_SECONDS = 7 * 24 * 3600
_INCREMENT = re.compile(r"(\d{6,})\.tar")


def namespace_grant(store: Any, prefix: str, seconds: int = CHANGELOG_GRANT_SECONDS,
                    *, max_objects: int = CHANGELOG_MAX_OBJECTS,
                    max_object_bytes: int = CHANGELOG_MAX_OBJECT_BYTES,
                    max_total_bytes: int = CHANGELOG_MAX_TOTAL_BYTES) -> dict[str, Any]:
    """A ``WriteNamespaceGrant`` (its JSON) for objects under ``prefix`` of ``store``, by the
    store's signed POST policy (blocking for some stores: call it off the loop)."""
    try:
        policy = store.signed_post_policy(prefix, max_object_bytes=max_object_bytes,
                                          expires_in=seconds)
    except UnsupportedOperation:
        raise StepError("an agent changelog is written through a signed upload policy and "
                        "the run's object store cannot sign one (use S3)") from None
    return WriteNamespaceGrant(
        policy.root_path.rstrip("/"), expires_in(seconds), max_objects, policy.max_object_bytes,
        max_total_bytes, policy.url, policy.fields, policy.path_field,
        policy.file_field).to_wire()


async def enable_changelog(http: Any, agent_url: str, agent_name: str, card: dict[str, Any],
                           *, store: Any, prefix: str, open_agent: bool) -> list[str]:
    """POST the agent's changelog with a namespace grant under ``prefix``; the roots it logs."""
    require_snapshots(card, agent_name, open_agent, "keep a changelog")
    grant = await asyncio.to_thread(namespace_grant, store, prefix)
    answer = await _call(http, "POST", f"{agent_url}{CHANGELOG_PATH}",
                         {"write_namespace": grant}, agent_name)
    roots = answer.get("roots")
    return [str(r) for r in roots] if isinstance(roots, list) else []


async def changelog_problem(http: Any, agent_url: str) -> str | None:
    """Why the agent's changelog stopped, or None while it keeps going."""
    import aiohttp

    try:
        async with http.get(f"{agent_url}{CHANGELOG_PATH}",
                            timeout=aiohttp.ClientTimeout(total=30)) as resp:
            status = await resp.json(content_type=None) if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return f"its changelog could not be read: {type(exc).__name__}: {exc}"
    if not isinstance(status, dict):
        return "it did not say how its changelog stands"
    error = status.get("error")
    return f"its changelog stopped: {error}" if error else None


def increments_under(store: Any, prefix: str, before: int | None) -> list[tuple[int, str]]:
    """(sequence, key) of the increments ``NNNNNN.tar`` right under ``prefix``, in order,
    those from ``before`` on left out (blocking: a thread)."""
    found = []
    for key in store.list(prefix):
        match = _INCREMENT.fullmatch(key[len(prefix):])
        if match and (before is None or int(match[1]) < before):
            found.append((int(match[1]), key))
    return sorted(found)


async def apply_changelog(http: Any, agent_url: str, agent_name: str, card: dict[str, Any], *,
                          store: Any, prefix: str, before: int | None,
                          target_context_id: str | None, open_agent: bool) -> tuple[int, str]:
    """PUT the increments under ``prefix`` (those before ``before``) to the agent, resuming
    their conversation; how many it applied and the context they made."""
    require_snapshots(card, agent_name, open_agent, "apply a changelog")
    found = await asyncio.to_thread(increments_under, store, prefix, before)
    if not found:
        raise StepError(f"no changelog increments under '{prefix}' in the run's object store"
                        + (f" before {before}" if before is not None else ""))
    expires = expires_in(GRANT_SECONDS)

    def grants() -> list[dict[str, Any]]:
        out = []
        for sequence, key in found:
            data = store.get(key)
            out.append({"sequence": sequence, "object": ReadObject(
                "application/x-tar", len(data), HttpGrant(
                    "http_get", _signed(store, key, "get", "application/x-tar"), expires),
                size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest()).to_wire()})
        return out

    body: dict[str, Any] = {"increments": await asyncio.to_thread(grants),
                            "resume_conversation": True}
    if target_context_id:
        body["target_context_id"] = target_context_id
    answer = await _call(http, "PUT", f"{agent_url}{CHANGELOG_PATH}", body, agent_name)
    context_id = answer.get("context_id")
    if answer.get("count") != len(found) or not isinstance(context_id, str) or not context_id:
        raise StepError(f"agent '{agent_name}' applied {answer.get('count')} of {len(found)} "
                        "changelog increments or named no context")
    return len(found), context_id

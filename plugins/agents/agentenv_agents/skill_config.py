"""Giving a deployed agent its skills (deploy_agent's ``skills``) through skill-config/v1.

Each entry is ``{name, description, skill_md}`` (the SKILL.md text) or ``{artifact_id, name?,
description?}`` (a stored skill artifact, ``agent-env artifact skill put``). A skill that is its
SKILL.md alone goes inline, which any agent with the extension takes. A skill with more files
goes in the object form: each file is staged in the run's object store and handed over as a
``ReadObject`` grant (a signed GET URL with its size and sha256), and the staged copies are
removed once the agent answered. That needs an agent whose card offers ``skill_bundle``, an
``open`` agent (a sealed one cannot reach the store) and a store that signs URLs; otherwise the
step fails naming what is missing, rather than giving the agent half a skill.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agent_env.api import SKILL_FILE, StepError
from agentenv_protocol.transfer import HttpGrant, ReadObject

from .object_forms import (
    card_extension,
    expires_in,
    forget_staged,
    offers_objects,
    signed_url,
)

GRANT_SECONDS = 900

#: Loads a stored skill artifact's files (path -> bytes).
Loader = Callable[[str], Awaitable[Mapping[str, bytes]]]
#: POSTs a JSON body, returning the answer; StepError on a refusal (a2a_type's ``post_ok``).
Poster = Callable[..., Awaitable[dict[str, Any]]]


async def give_skills(http: Any, agent_url: str, agent_name: str, card: dict[str, Any],
                      entries: list[dict[str, Any]], *, load: Loader, post: Poster,
                      store: Any, open_agent: bool, staging_prefix: str) -> list[str]:
    """POST every skill to the agent's ``/ext/skill-config``; the names it took, in order."""
    if not entries:
        return []
    if card_extension(card, "skill-config") is None:
        raise StepError(f"agent '{agent_name}' takes no skills (its card has no skill-config "
                        "extension), but the step gives it some")
    bundles_ok = offers_objects(card, "skill-config", "skill_bundle")
    names: list[str] = []
    url = f"{agent_url}/ext/skill-config"

    async def send(body: dict[str, Any]) -> None:
        answer = await post(http, url, body, agent_name, timeout=GRANT_SECONDS)
        names.append(str(answer.get("name") or body["name"]))

    for entry in entries:
        name, description = entry.get("name"), entry.get("description") or ""
        if "skill_md" in entry:
            body: dict[str, Any] = {"name": name, "description": description,
                                    "skill_md": entry["skill_md"]}
            await send(body)
            continue
        artifact_id = str(entry["artifact_id"])
        files = dict(await load(artifact_id))
        name = name or artifact_id.rsplit("/", 1)[-1]
        if SKILL_FILE not in files:
            raise StepError(f"skill artifact '{artifact_id}' holds no {SKILL_FILE}")
        if len(files) == 1:
            body = {"name": name, "description": description,
                    "skill_md": files[SKILL_FILE].decode("utf-8", "replace")}
            await send(body)
            continue
        why = None if bundles_ok else "its card offers no skill_bundle (object) form"
        if why is None and not open_agent:
            why = ("it is sealed and cannot reach the object store; set network_policy = "
                   '"open" on its deploy_agent step')
        if why is not None:
            raise StepError(f"agent '{agent_name}' cannot take skill '{artifact_id}' "
                            f"({len(files)} files): {why}")
        staged: list[str] = []
        try:
            bundle = await asyncio.to_thread(  # store calls block: not on the loop
                _stage, files, store, f"{staging_prefix.rstrip('/')}/{uuid.uuid4().hex}",
                staged, artifact_id)
            body = {"name": name, "description": description, "skill_bundle": bundle}
            await send(body)
        finally:
            await asyncio.to_thread(forget_staged, store, staged)
    return names


def _stage(files: Mapping[str, bytes], store: Any, prefix: str, staged: list[str],
           artifact_id: str) -> dict[str, Any]:
    expires = expires_in(GRANT_SECONDS)
    listed = []
    for path, data in sorted(files.items()):
        key = f"{prefix}/{path}"
        store.put(key, data, allow_overwrite=True)
        staged.append(key)
        url = signed_url(store, key, put=False, seconds=GRANT_SECONDS)
        if url is None:
            raise StepError(f"skill '{artifact_id}' has several files and the run's object "
                            "store cannot sign URLs to hand them over (use S3 or GCS)")
        grant = ReadObject("application/octet-stream", len(data),
                           HttpGrant("http_get", url, expires), size_bytes=len(data),
                           sha256=hashlib.sha256(data).hexdigest())
        listed.append({"path": path, "object": grant.to_wire()})
    return {"max_total_bytes": max(1, sum(len(d) for d in files.values())), "files": listed}

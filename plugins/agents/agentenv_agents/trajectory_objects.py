"""trajectory/v1's object form: an agent uploads a whole trajectory through a grant.

Why: a long trajectory is megabytes; read inline it crosses the agent's connection page by page.
An agent whose card offers the object form (``params.objects`` lists ``trajectory``) can PUT it
straight into the run's object store through a signed URL (a ``WriteObject`` grant) instead.

When it is used (chosen per prompt, else the inline pages as before):

- the agent's card offers it;
- the agent's container may reach the store: an ``open`` agent. A sealed agent reaches only its
  sandbox's gateways, so a grant would only fail after a timeout;
- the run's object store signs PUT URLs (S3, GCS; the filesystem store does not).

The upload lands under a staging key. The runtime then reads it from the store, checks size and
sha256 against what the agent reports, and removes the staging object; the events then go the
usual way (secrets stripped, kept under the prompt's trajectory key). Any refusal (a transfer
error from the agent, a digest that does not match, a store error) falls back to the inline
read, so a trajectory is never lost to the object form.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from typing import Any

from agentenv_protocol.transfer import HttpGrant, WriteObject

from .object_forms import expires_in, forget_staged, signed_url

#: How long a trajectory grant is valid, and the most bytes it lets the agent write.
GRANT_SECONDS = 900
MAX_BYTES = 512 * 1024 * 1024


async def read_by_object(http: Any, agent_url: str, task_id: str, store: Any,
                         staging_prefix: str) -> tuple[list[Any] | None, str | None]:
    """``(events, None)`` read through a grant, or ``(None, why)`` when the object form could
    not be used (the caller reads inline). ``store`` is an ``ObjectStore``."""
    import aiohttp

    key = f"{staging_prefix.rstrip('/')}/trajectory-upload-{uuid.uuid4().hex[:12]}.json"
    url = signed_url(store, key, put=True, seconds=GRANT_SECONDS,
                     content_type="application/json")
    if url is None:
        return None, "the object store does not sign upload URLs"
    grant = WriteObject("application/json", MAX_BYTES,
                        HttpGrant("http_put", url, expires_in(GRANT_SECONDS))).to_wire()
    try:
        async with http.post(f"{agent_url}/ext/trajectory",
                             json={"task_id": task_id, "objects": {"trajectory": grant}},
                             timeout=aiohttp.ClientTimeout(total=GRANT_SECONDS)) as resp:
            body = await resp.json(content_type=None)
        if resp.status != 200 or not isinstance(body, dict):
            error = (body or {}).get("error") if isinstance(body, dict) else None
            return None, f"the agent answered HTTP {resp.status}: {error or body!r}"[:300]
        uploaded = (body.get("objects") or {}).get("trajectory") or {}
        data = await asyncio.to_thread(store.get, key)  # a store call blocks: not on the loop
    except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as exc:
        await asyncio.to_thread(forget_staged, store, [key])
        return None, f"{type(exc).__name__}: {exc}"[:300]
    await asyncio.to_thread(forget_staged, store, [key])
    if uploaded.get("size_bytes") != len(data) or \
            uploaded.get("sha256") != hashlib.sha256(data).hexdigest():
        return None, "the stored upload does not match the size and sha256 the agent reported"
    try:
        events = json.loads(data)
    except ValueError:
        return None, "the uploaded trajectory is not JSON"
    if not isinstance(events, list):
        return None, "the uploaded trajectory is not a JSON array"
    return events, None


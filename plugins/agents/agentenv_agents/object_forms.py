"""What an agent's card offers, and the staging the object forms share.

Why one place: the a2a agent type asks a card whether it serves an extension (mcp-config,
trajectory, skill-config, snapshot), what its agent-config takes, and whether an extension
offers an object form (``params.objects``); and the object forms (a trajectory uploaded by
grant, a skill bundle read by grant, snapshots saved and loaded by grant) all need signed URLs
of the run's store and stage objects there, removed after.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent_env.api import UnsupportedOperation


def card_extension(card: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The card's extension whose URI names ``name`` (``"mcp-config"``), or None."""
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and name in str(ext.get("uri", "")):
            return ext
    return None


def offers_objects(card: dict[str, Any], name: str, form: str) -> bool:
    """Whether extension ``name`` lists the object form ``form`` in its ``params.objects``."""
    ext = card_extension(card, name)
    objects = ((ext or {}).get("params") or {}).get("objects") or []
    return isinstance(objects, list) and form in objects


def signed_url(store: Any, key: str, *, put: bool, seconds: int,
               content_type: str | None = None) -> str | None:
    """A signed ``http(s)`` URL that reads ``key`` (or, ``put``, uploads it) for ``seconds``;
    None when the store gives none an agent could use: it cannot sign, or it gives ``file://``
    URLs (the filesystem store's reads). Blocking for some stores: call it off the loop."""
    try:
        url = (store.signed_put_url(key, expires_in=seconds, content_type=content_type)
               if put else store.signed_get_url(key, expires_in=seconds))
    except UnsupportedOperation:
        return None
    return str(url) if str(url).startswith(("https://", "http://")) else None


def expires_in(seconds: float) -> dt.datetime:
    """When a grant made now for ``seconds`` runs out."""
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


def forget_staged(store: Any, keys: list[str]) -> None:
    """Remove staged objects; one left behind is clutter, not a failure (blocking: a thread)."""
    for key in keys:
        try:
            store.delete(key)
        except Exception:
            pass

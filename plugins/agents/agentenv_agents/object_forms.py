"""What an agent's card offers, and the staging the object forms share.

Why one place: the a2a agent type asks a card whether it serves an extension (mcp-config,
trajectory, skill-config), what its agent-config takes, and whether an extension offers an
object form (``params.objects``); and both object forms (a trajectory uploaded by grant, a skill
bundle read by grant) stage objects in the run's store and remove them after.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


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

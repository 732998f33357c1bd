"""``plural(3, "task")`` -> ``3 tasks``: how every count is worded for people.

One function, so every listing, summary and error says ``1 sandbox`` / ``2 sandboxes`` the same
way (four spellings of this lived in the CLI, the engine and the bundle model).
"""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, made plural unless ``count`` is 1: ``many`` when given, else
    ``-es`` after s, x and ch, else ``-s``."""
    if count == 1:
        return f"{count} {noun}"
    if many is None:
        many = f"{noun}es" if noun.endswith(("s", "x", "ch")) else f"{noun}s"
    return f"{count} {many}"

"""Key names: W3C ``KeyboardEvent.key`` values (``Enter``, ``Control``, ``a``), with the
spellings agents often use (``ctrl``, ``Return``, ``esc``) read as those."""

from __future__ import annotations

from typing import Any

from .errors import InvalidArgument, Unsupported

NAMED = ("Enter", "Tab", "Escape", "Backspace", "Delete", "ArrowUp", "ArrowDown", "ArrowLeft",
         "ArrowRight", "Home", "End", "PageUp", "PageDown", "Insert", "Control", "Shift", "Alt",
         "Meta", "CapsLock", "ContextMenu", "PrintScreen", "Pause",
         *(f"F{n}" for n in range(1, 25)))
ALIASES = {"ctrl": "Control", "control": "Control", "shift": "Shift", "alt": "Alt",
           "option": "Alt", "meta": "Meta", "cmd": "Meta", "command": "Meta", "super": "Meta",
           "win": "Meta", "enter": "Enter", "return": "Enter", "esc": "Escape",
           "escape": "Escape", "tab": "Tab", "backspace": "Backspace", "delete": "Delete",
           "del": "Delete", "space": " ", "up": "ArrowUp", "down": "ArrowDown",
           "left": "ArrowLeft", "right": "ArrowRight", "pageup": "PageUp",
           "pagedown": "PageDown", "home": "Home", "end": "End", "insert": "Insert"}
_BY_LOWER = {name.lower(): name for name in NAMED}


def key_name(key: Any) -> str:
    """One key's W3C name; InvalidArgument for what is none."""
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"a key is a W3C key name such as 'Enter' or 'a', not {key!r}")
    if len(key) == 1:
        return key
    found = _BY_LOWER.get(key.lower()) or ALIASES.get(key.lower())
    if found is None:
        raise InvalidArgument(f"{key!r} is not a key name; use W3C names such as 'Enter', "
                              "'Control', 'ArrowLeft', 'F5' or one character")
    return found


def chord(keys: Any, allowed: Any = "all") -> list[str]:
    """``keys`` (a non-empty list) as W3C names, each one this computer has."""
    if not isinstance(keys, list) or not keys:
        raise InvalidArgument("keys is a non-empty list of key names, such as ['Control', 's']")
    names = [key_name(k) for k in keys]
    if allowed != "all":
        missing = [n for n in names if n not in allowed]
        if missing:
            raise Unsupported(f"this computer has no key(s) {missing}")
    return names

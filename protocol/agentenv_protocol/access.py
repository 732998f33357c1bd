"""Who calls (a :class:`Caller`), and tool access rules per caller role (``/tools/disable``
and ``/tools/enable``).

Lookup order for a call: the call's role, then role ``*``; within a role a rule naming the tool
wins over that role's ``*`` rule; a hidden-by-default tool ignores ``*`` rules and stays refused
until a rule names it. ``(role "*", tools "*")`` clears every rule first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

NO_ROLE = "default"


@attrs.define(frozen=True)
class Caller:
    """Who is calling: role (None = default) and session, from ``_meta`` or headers."""

    role: str | None
    session: str | None


def normalise_role(role: Any) -> str | None:
    """``"default"`` or blank means no role."""
    if not isinstance(role, str):
        return None
    role = role.strip()
    if not role or role == NO_ROLE:
        return None
    return role


class AccessRuleError(ValueError):
    """A malformed ``/tools/disable|enable`` body."""


class ToolAccessRules:
    """Allow/deny rules keyed by (role, tool-or-*); empty rules allow every visible tool."""

    def __init__(self) -> None:
        self._rules: dict[tuple[str, str], bool] = {}

    def __bool__(self) -> bool:
        return bool(self._rules)

    def allowed(self, role: str | None, tool: str, *, hidden: bool = False) -> bool:
        """Whether a caller with ``role`` (None = default) may call ``tool``."""
        rules = self._rules
        if not rules:
            return not hidden
        role_key = role or NO_ROLE
        for r in (role_key, "*"):
            named = rules.get((r, tool))
            if named is not None:
                return named
            if not hidden:
                wildcard = rules.get((r, "*"))
                if wildcard is not None:
                    return wildcard
        return not hidden

    def apply(self, body: Any, *, allow: bool, tools: Mapping[str, bool]) -> dict[str, Any]:
        """Apply one request body; ``tools`` maps every known tool name to its hidden flag.

        Returns ``{role, disabled, allowed}`` for the body's role after the change.
        """
        if not isinstance(body, Mapping):
            raise AccessRuleError("body must be a JSON object")
        role = body.get("role")
        names = body.get("tools")
        if role is None:
            role = NO_ROLE
        if not isinstance(role, str):
            raise AccessRuleError("role must be a string")
        role = role.strip() or NO_ROLE
        if names == "*":
            targets: Iterable[str] = ("*",)
        elif isinstance(names, list) and all(isinstance(n, str) for n in names):
            targets = names
        else:
            raise AccessRuleError('tools must be a list of names or "*"')
        if role == "*" and names == "*":
            self._rules.clear()
            if not allow:
                self._rules[("*", "*")] = False
        else:
            for name in targets:
                self._rules[(role, name)] = allow
        check_role = None if role == NO_ROLE else role
        disabled = sorted(n for n, h in tools.items() if not self.allowed(check_role, n, hidden=h))
        allowed = sorted(n for n, h in tools.items() if self.allowed(check_role, n, hidden=h))
        return {"role": role, "disabled": disabled, "allowed": allowed}

    def snapshot(self) -> list[dict[str, Any]]:
        """The rules as data, for ``/state``."""
        return [{"role": r, "tool": t, "allowed": a} for (r, t), a in sorted(self._rules.items())]

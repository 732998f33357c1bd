"""Registries: which contributed name is in effect, by one rule for every kind.

Every contribution kind, CLI commands included, goes through :func:`resolve_conflicts`: a name
claimed by two outside plugins is left out for both (``conflict``), and an outside plugin may
not take a name a built-in plugin uses (``skipped``). Keeping one rule means ``plugin check``
reports a shadowed command the same way as a shadowed step type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import click

from agent_env.contributions import Lazy
from agent_env.plugins.discovery import ACTIVE, CONFLICT, SKIPPED

#: contribution kind -> (hook name, how to read the contributed name; a Lazy has ``name``)
CONTRIBUTION_HOOKS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "env_type": ("agent_env_env_types", lambda c: c.name),
    "sandbox_provider": ("agent_env_sandbox_providers", lambda c: c.name),
    "step_type": ("agent_env_step_types", lambda c: c.name if isinstance(c, Lazy) else c.type),
    "store": ("agent_env_stores", lambda c: f"{c.kind}:{c.name}"),
    "bundle": ("agent_env_bundles", lambda c: c.name),
    "agent_type": ("agent_env_agent_types", lambda c: c.name),
    "agent": ("agent_env_agents", lambda c: c.name),
    "model_provider": ("agent_env_model_providers", lambda c: c.name),
    "runner": ("agent_env_runners", lambda c: c.name),
    "bundle_format": ("agent_env_bundle_formats", lambda c: c.name),
}
CLI_COMMAND = "cli_command"


@attrs.define
class Contribution:
    """One named thing a plugin provides (a step type, a store backend, a CLI command...)."""

    kind: str
    name: str
    plugin: str
    status: str = ACTIVE
    reason: str | None = None
    detail: str | None = None
    obj: Any = attrs.field(default=None, repr=False)


class Registry(Mapping[str, Any]):
    """Name -> contributed object, importing a :class:`Lazy` one the first time it is read.

    Names and membership never import anything; ``registry[name]`` (and ``get``, ``items``)
    does, through ``load``, which decides what an import failure means.
    """

    def __init__(self, entries: dict[str, Any], load: Callable[[str, Lazy], Any]) -> None:
        self._entries = entries
        self._load = load

    def __getitem__(self, name: str) -> Any:
        value = self._entries[name]
        if isinstance(value, Lazy):
            value = self._entries[name] = self._load(name, value)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def resolve_conflicts(found: list[Contribution], builtin: set[str]) -> list[Contribution]:
    """Mark the contributions that are not in effect, and why (``found`` is changed in place)."""
    claims: dict[str, list[Contribution]] = {}
    for contribution in found:
        claims.setdefault(contribution.name, []).append(contribution)
    for name, group in claims.items():
        in_core = any(c.plugin in builtin for c in group)
        outside = [c for c in group if c.plugin not in builtin]
        owners = {c.plugin for c in outside}
        for contribution in outside:
            if in_core:
                contribution.status, contribution.reason = SKIPPED, "shadows-builtin"
                contribution.detail = f"'{name}' is a built-in name"
            elif len(owners) > 1:
                others = sorted(owners - {contribution.plugin})
                contribution.status, contribution.reason = CONFLICT, "name-conflict"
                contribution.detail = f"also provided by {', '.join(others)}"
    return found


class ClaimingGroup(click.Group):
    """The group ``agent_env_cli`` implementations add to: it records who claims which name.

    Commands are not added to the real root until the claims are resolved, so a plugin can
    never replace a core command, whatever order the hook implementations run in.
    """

    def __init__(self, claim: Callable[[str, click.Command], None]) -> None:
        super().__init__(name="agent-env")
        self._claim = claim

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self._claim(name, cmd)

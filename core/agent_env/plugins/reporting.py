"""What the host knows, told to people: package rows, missing-plugin messages, stray tables.

``plugin list/show/check``, the installer and every "no such backend" error read from here, so
a missing plugin is explained one way wherever it is hit: not installed (which extra to
install) or installed but broken (its status and reason, and where to look).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_env.errors import MissingPluginError, UserError
from agent_env.plugins.discovery import (
    ACTIVE,
    CONFLICT,
    FAILED,
    SKIPPED,
    UNLOADED,
    PluginRecord,
    normalise,
)
from agent_env.plugins.registries import Contribution

if TYPE_CHECKING:
    from agent_env.plugins import PluginHost

# The worst status wins when a package has several plugin modules or contributions.
SEVERITY = {ACTIVE: 0, UNLOADED: 1, SKIPPED: 2, CONFLICT: 3, FAILED: 4}

#: Contribution kind -> how people call one of them in a message.
KIND_LABELS = {
    "step_type": ("step type", "step types"),
    "env_type": ("env type", "env types"),
    "sandbox_provider": ("sandbox provider", "sandbox providers"),
    "store": ("store", "stores"),
    "bundle": ("bundle", "bundles"),
    "agent_type": ("agent type", "agent types"),
    "agent": ("agent", "agents"),
    "cli_command": ("command", "commands"),
    "model_provider": ("model provider", "model providers"),
    "runner": ("runner", "runners"),
    "bundle_format": ("bundle format", "bundle formats"),
}


def missing(host: PluginHost, kind: str, name: str) -> MissingPluginError:
    """The error for a ``kind`` contribution ``name`` that is not in effect, saying why.

    ``kind`` is a contribution kind; stores use ``store`` with ``name`` = ``KIND:BACKEND``.
    """
    from agent_env.plugins.catalog import provider_of

    label = _label(kind, name)
    registry = host.registry(kind)
    for contribution in host.contributions(kind):
        if contribution.name == name and contribution.status != ACTIVE:
            return MissingPluginError(
                f"{label} is provided by plugin {contribution.plugin} but is not in effect "
                f"({contribution.reason}: {contribution.detail}); see `agent-env plugin check`"
            )
    first_party = provider_of(kind, name)
    if first_party is not None:
        broken = [
            r for r in host.records
            if normalise(r.distribution) == normalise(first_party.distribution)
            and r.status != ACTIVE
        ]
        if broken:
            record = broken[0]
            return MissingPluginError(
                f"{label} comes from the {first_party.short_name} plugin, which is installed "
                f"but {record.status} ({record.reason}: {record.detail}); "
                f"see `agent-env plugin show {first_party.short_name}`"
            )
        return MissingPluginError(
            f"{label} comes from the {first_party.short_name} plugin, which is not installed "
            f"({first_party.install_hint()})"
        )
    if kind == "store":
        store_kind = name.split(":", 1)[0]
        names = sorted(n.split(":", 1)[1] for n in registry if n.startswith(f"{store_kind}:"))
    else:
        names = sorted(registry)
    what, short = _what(kind, name)
    return MissingPluginError(
        f"no {what} named '{short}' (installed: {', '.join(names) or 'none'})"
    )


def _what(kind: str, name: str) -> tuple[str, str]:
    """(``object store``, ``s3``) for ``store``/``object:s3``; (``step type``, x) otherwise."""
    if kind == "store":
        store_kind, backend = name.split(":", 1)
        return f"{store_kind} store", backend
    return KIND_LABELS.get(kind, (kind,))[0], name


def _label(kind: str, name: str) -> str:
    what, short = _what(kind, name)
    return f"the '{short}' {what}"


def unknown_plugin_tables(host: PluginHost, tables: dict[str, Any]) -> list[str]:
    """Messages for ``[plugins.X]`` tables that name no installed plugin."""
    known = set()
    for record in host.records:
        known |= record.names()
    installed = sorted({r.distribution for r in host.records if not r.builtin})
    return [
        f"[plugins.{name}] names no installed plugin (installed: {', '.join(installed) or 'none'})"
        for name in tables
        if normalise(name) not in known
    ]


def package_rows(host: PluginHost) -> list[dict[str, Any]]:
    """One row per distribution: its modules, contributions and overall status."""
    contributions = host.all_contributions()
    rows: dict[str, dict[str, Any]] = {}
    for record in host.records:
        row = rows.setdefault(
            record.distribution,
            {
                "package": record.distribution,
                "version": record.version,
                "builtin": record.builtin,
                "status": ACTIVE,
                "reason": None,
                "detail": None,
                "modules": [],
                "provides": [],
            },
        )
        row["modules"].append(_record_json(record))
        _worsen(row, record.status, record.reason, record.detail)
        for contribution in contributions:
            if contribution.plugin == record.name:
                row["provides"].append(_contribution_json(contribution))
                if contribution.status != ACTIVE:
                    _worsen(row, contribution.status, contribution.reason, contribution.detail)
    return sorted(rows.values(), key=lambda r: (not r["builtin"], r["package"]))


def find_row(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row for a plugin named by distribution or module name; a UserError listing others."""
    wanted = normalise(name)
    for row in rows:
        names = {normalise(row["package"])} | {normalise(m["name"]) for m in row["modules"]}
        if wanted in names:
            return row
    known = ", ".join(r["package"] for r in rows)
    raise UserError(f"no plugin package named '{name}' (installed: {known})")


def problems(host: PluginHost, rows: list[dict[str, Any]]) -> list[str]:
    """Everything ``plugin check`` fails on: broken modules, dropped names, stray tables."""
    found: list[str] = []
    for row in rows:
        for module in row["modules"]:
            if module["status"] == FAILED:
                found.append(f"{row['package']}: {module['reason']}: {module['detail']}")
        for item in row["provides"]:
            if item["status"] in (CONFLICT, SKIPPED):
                label = KIND_LABELS[item["kind"]][0]
                found.append(
                    f"{row['package']}: {label} '{item['name']}' {item['status']} "
                    f"({item['reason']}: {item['detail']})"
                )
    found.extend(host.unknown_tables)
    return found


def _worsen(row: dict[str, Any], status: str, reason: str | None, detail: str | None) -> None:
    if SEVERITY[status] > SEVERITY[row["status"]]:
        row["status"], row["reason"], row["detail"] = status, reason, detail


def _record_json(record: PluginRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "module": record.module,
        "status": record.status,
        "reason": record.reason,
        "detail": record.detail,
    }


def _contribution_json(contribution: Contribution) -> dict[str, Any]:
    return {
        "kind": contribution.kind,
        "name": contribution.name,
        "plugin": contribution.plugin,
        "status": contribution.status,
        "reason": contribution.reason,
        "detail": contribution.detail,
    }

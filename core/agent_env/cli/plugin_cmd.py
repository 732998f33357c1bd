"""``agent-env plugin list|show|check|add|remove``: see and manage what extends agent-env."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from agent_env.errors import UserError
from agent_env.plugins import (
    ACTIVE,
    CONFLICT,
    CONTRIBUTION_HOOKS,
    FAILED,
    SKIPPED,
    UNLOADED,
    Contribution,
    PluginRecord,
    get_host,
)

FORMAT_VERSION = 1
_KIND_LABELS = {
    "step_type": ("step type", "step types"),
    "env_type": ("env type", "env types"),
    "sandbox_provider": ("sandbox provider", "sandbox providers"),
    "store": ("store", "stores"),
    "bundle": ("bundle", "bundles"),
    "cli_command": ("command", "commands"),
}
# The worst status wins when a package has several plugin modules or contributions.
_SEVERITY = {ACTIVE: 0, UNLOADED: 1, SKIPPED: 2, CONFLICT: 3, FAILED: 4}


def _package_rows() -> list[dict[str, Any]]:
    """One row per distribution: its modules, contributions and overall status."""
    host = get_host()  # the CLI has already let plugins add their commands
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


def _worsen(row: dict[str, Any], status: str, reason: str | None, detail: str | None) -> None:
    if _SEVERITY[status] > _SEVERITY[row["status"]]:
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


def _summary(provides: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for item in provides:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    order = [*CONTRIBUTION_HOOKS, "cli_command"]
    parts = []
    for kind in order:
        if kind in counts:
            one, many = _KIND_LABELS[kind]
            parts.append(f"{counts[kind]} {one if counts[kind] == 1 else many}")
    return ", ".join(parts) or "-"


def _status_text(row: dict[str, Any]) -> str:
    text = row["status"]
    if row["reason"]:
        text += f" ({row['reason']})"
    if row["builtin"]:
        text += " [built-in]"
    return text


def _header() -> list[str]:
    from agent_env.config import find_config_file

    try:
        path = find_config_file()
        config = str(path) if path else "none (local defaults)"
    except UserError as exc:
        config = f"error: {exc.message}"
    return [
        f"Python environment: {sys.prefix} (python {sys.version.split()[0]})",
        f"Config: {config}",
    ]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


@click.group()
def plugin() -> None:
    """List, check, add and remove plugins."""


@plugin.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_plugins(as_json: bool) -> None:
    """Every plugin package: version, what it provides and its status."""
    rows = _package_rows()
    if as_json:
        payload = {
            "format_version": FORMAT_VERSION,
            "python": sys.executable,
            "environment": sys.prefix,
            "plugins": rows,
        }
        click.echo(json.dumps(payload, indent=2))
        return
    for line in _header():
        click.echo(line)
    click.echo()
    table = [["PACKAGE", "VERSION", "PROVIDES", "STATUS"]]
    for row in rows:
        table.append([row["package"], row["version"], _summary(row["provides"]), _status_text(row)])
    for line in _table(table):
        click.echo(line)
    problems = [r for r in rows if r["status"] in (FAILED, CONFLICT)]
    for row in problems:
        click.echo(f"{row['package']}: {row['detail']}", err=True)


def _find_row(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from agent_env.plugins import _normalise

    wanted = _normalise(name)
    for row in rows:
        names = {_normalise(row["package"])} | {_normalise(m["name"]) for m in row["modules"]}
        if wanted in names:
            return row
    known = ", ".join(r["package"] for r in rows)
    raise UserError(f"no plugin package named '{name}' (installed: {known})")


@plugin.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def show_plugin(name: str, as_json: bool) -> None:
    """One plugin package: each module and contribution with its status and reason."""
    row = _find_row(name, _package_rows())
    if as_json:
        click.echo(json.dumps({"format_version": FORMAT_VERSION, **row}, indent=2))
        return
    click.echo(f"{row['package']} {row['version']}: {_status_text(row)}")
    for module in row["modules"]:
        line = f"  module {module['module']}: {module['status']}"
        if module["reason"]:
            line += f" ({module['reason']}: {module['detail']})"
        click.echo(line)
    if not row["provides"]:
        click.echo("  provides nothing")
        return
    table = [["KIND", "NAME", "STATUS", "REASON"]]
    for item in row["provides"]:
        reason = f"{item['reason']}: {item['detail']}" if item["reason"] else ""
        table.append([_KIND_LABELS[item["kind"]][0], item["name"], item["status"], reason])
    for line in _table(table):
        click.echo(f"  {line}")


@plugin.command("check")
def check_plugins() -> None:
    """Load every plugin; exit 1 if any failed, conflicts or is shadowed."""
    rows = _package_rows()
    problems: list[str] = []
    count = 0
    for row in rows:
        for module in row["modules"]:
            if module["status"] == FAILED:
                problems.append(f"{row['package']}: {module['reason']}: {module['detail']}")
        for item in row["provides"]:
            count += 1
            if item["status"] in (CONFLICT, SKIPPED):
                label = _KIND_LABELS[item["kind"]][0]
                problems.append(
                    f"{row['package']}: {label} '{item['name']}' {item['status']} "
                    f"({item['reason']}: {item['detail']})"
                )
    if problems:
        for problem in problems:
            click.echo(f"problem: {problem}")
        raise UserError(f"{len(problems)} plugin problem(s); see 'agent-env plugin show NAME'")
    loaded = [r for r in rows if r["status"] == ACTIVE]  # unloaded/turned-off ones don't count
    click.echo(f"ok: {len(loaded)} plugin package(s), {count} contribution(s), all in effect")


@plugin.command("add")
@click.argument("specs", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Show the plan and change nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before installing.")
def add_plugins(specs: tuple[str, ...], dry_run: bool, yes: bool) -> None:
    """Install plugin packages into this agent-env's Python environment."""
    from agent_env.plugins.installer import add

    add(list(specs), dry_run=dry_run, assume_yes=yes)


@plugin.command("remove")
@click.argument("names", nargs=-1, required=True)
@click.option("--force", is_flag=True, help="Remove even if config or stored tasks use it.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before removing.")
def remove_plugins(names: tuple[str, ...], force: bool, yes: bool) -> None:
    """Uninstall plugin packages (never the core)."""
    from agent_env.plugins.installer import remove

    remove(list(names), force=force, assume_yes=yes)

"""``agent-env plugin list|show|check|add|remove``: see and manage what extends agent-env."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from agent_env.cli.console import echo
from agent_env.errors import UserError
from agent_env.plugins import ACTIVE, CONFLICT, CONTRIBUTION_HOOKS, FAILED, INSTALLERS
from agent_env.plugins.reporting import KIND_LABELS, find_row, package_rows, problems
from agent_env.plural import plural
from agent_env.runtime import current

FORMAT_VERSION = 1
#: What a distribution written for the reference needs to extend agent-env.
FOREIGN_NEEDS = ("to load here it needs an 'agent_env' entry point to a module of pluggy hooks "
                 "(README: Writing a plugin)")


def _package_rows() -> list[dict[str, Any]]:
    return package_rows(current().host)  # the CLI has already let plugins add their commands


def _summary(provides: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for item in provides:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    order = [*CONTRIBUTION_HOOKS, "cli_command"]
    parts = []
    for kind in order:
        if kind in counts:
            one, many = KIND_LABELS[kind]
            parts.append(plural(counts[kind], one, many))
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
    from agent_env.plugins.discovery import foreign_plugins

    rows = _package_rows()
    foreign = foreign_plugins()
    if as_json:
        payload = {
            "format_version": FORMAT_VERSION,
            "python": sys.executable,
            "environment": sys.prefix,
            "plugins": rows,
            "foreign": [{"package": f.distribution, "version": f.version, "status": "foreign",
                         "groups": {g: list(n) for g, n in f.groups.items()},
                         "needs": FOREIGN_NEEDS} for f in foreign],
        }
        click.echo(json.dumps(payload, indent=2))
        return
    for line in _header():
        echo(line)
    echo()
    table = [["PACKAGE", "VERSION", "PROVIDES", "STATUS"]]
    for row in rows:
        table.append([row["package"], row["version"], _summary(row["provides"]), _status_text(row)])
    for f in foreign:
        groups = ", ".join(f"{g} ({', '.join(n)})" for g, n in f.groups.items())
        table.append([f.distribution, f.version, groups, "foreign (not loaded)"])
    for line in _table(table):
        echo(line)
    if foreign:
        echo(f"foreign: written for the reference framework's entry points; {FOREIGN_NEEDS}")
    problems = [r for r in rows if r["status"] in (FAILED, CONFLICT)]
    for row in problems:
        echo(f"{row['package']}: {row['detail']}", err=True)


@plugin.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def show_plugin(name: str, as_json: bool) -> None:
    """One plugin package: each module and contribution with its status and reason."""
    row = find_row(name, _package_rows())
    if as_json:
        click.echo(json.dumps({"format_version": FORMAT_VERSION, **row}, indent=2))
        return
    echo(f"{row['package']} {row['version']}: {_status_text(row)}")
    for module in row["modules"]:
        line = f"  module {module['module']}: {module['status']}"
        if module["reason"]:
            line += f" ({module['reason']}: {module['detail']})"
        echo(line)
    if not row["provides"]:
        echo("  provides nothing")
        return
    table = [["KIND", "NAME", "STATUS", "REASON"]]
    for item in row["provides"]:
        reason = f"{item['reason']}: {item['detail']}" if item["reason"] else ""
        table.append([KIND_LABELS[item["kind"]][0], item["name"], item["status"], reason])
    for line in _table(table):
        echo(f"  {line}")


@plugin.command("check")
@click.option("--json", "as_json", is_flag=True,
              help="Print the packages and problems as JSON (exit code as without it).")
def check_plugins(as_json: bool) -> int:
    """Load every plugin; exit 1 if any failed, conflicts or is shadowed."""
    current().host.load_everything()  # list stays cheap; check imports every lazy contribution
    rows = _package_rows()
    found = problems(current().host, rows)
    count = sum(len(row["provides"]) for row in rows)
    if as_json:
        import json

        click.echo(json.dumps({"format_version": FORMAT_VERSION, "ok": not found,
                               "problems": found, "plugins": rows}, indent=2, default=str))
        return 1 if found else 0
    if found:
        for problem in found:
            echo(f"problem: {problem}")
        raise UserError(f"{len(found)} plugin problem(s); see 'agent-env plugin show NAME'")
    loaded = [r for r in rows if r["status"] == ACTIVE]  # unloaded/turned-off ones don't count
    echo(f"ok: {len(loaded)} plugin package(s), {count} contribution(s), all in effect")
    return 0


@plugin.command("add")
@click.argument("specs", nargs=-1, required=True)
@click.option("--installer", type=click.Choice(INSTALLERS),
              help="Use this installer, not the one that made the environment (uv-project "
                   "and uv-tool install through uv pip; pipx cannot add to it).")
@click.option("--index-url", metavar="URL", help="The package index the installer uses.")
@click.option("--dry-run", is_flag=True, help="Show the plan and change nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before installing.")
@click.option("--keep", is_flag=True,
              help="Keep what was installed even when a plugin in it does not load.")
def add_plugins(specs: tuple[str, ...], installer: str | None, index_url: str | None,
                dry_run: bool, yes: bool, keep: bool) -> None:
    """Install plugin packages into this agent-env's Python environment."""
    from agent_env.plugins.installer import add

    add(list(specs), dry_run=dry_run, assume_yes=yes, installer=installer,
        index_url=index_url, keep=keep)


@plugin.command("remove")
@click.argument("names", nargs=-1, required=True)
@click.option("--force", is_flag=True, help="Remove even if config or stored tasks use it.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before removing.")
def remove_plugins(names: tuple[str, ...], force: bool, yes: bool) -> None:
    """Uninstall plugin packages (never the core)."""
    from agent_env.plugins.installer import remove

    remove(list(names), force=force, assume_yes=yes)

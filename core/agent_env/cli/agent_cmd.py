"""``agent-env a2a-agent list|get``: the agents plugins ship (``agent_env_agents``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


def _rows() -> list[dict[str, Any]]:
    from agent_env.plugins import ACTIVE, get_host

    host = get_host()
    rows = []
    for contribution in host.contributions("agent"):
        if contribution.status != ACTIVE:
            continue
        record = host.record(contribution.plugin)
        source = contribution.obj
        rows.append({
            "id": source.name, "aliases": list(source.aliases), "path": str(source.path),
            "package": record.distribution if record else contribution.plugin,
        })
    return sorted(rows, key=lambda r: r["id"])


@click.group("a2a-agent")
def a2a_agent() -> None:
    """The A2A agents installed plugins ship."""


@a2a_agent.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_agents(as_json: bool) -> None:
    """Every installed agent: id, the plugin that ships it, its agent type."""
    from agent_env.agents import read_agent

    rows = _rows()
    for row in rows:
        try:
            definition = read_agent(row["id"], Path(row["path"]))
            row["type"], row["description"] = definition.type, definition.description
        except Exception as exc:  # one broken folder must not hide the others
            row["type"], row["description"] = "?", f"unreadable: {exc}"
    if as_json:
        click.echo(json.dumps({"format_version": 1, "agents": rows}, indent=2))
        return
    if not rows:
        click.echo("No agents are installed (an agents plugin ships them).")
        return
    width = max(len(r["id"]) for r in rows)
    for row in rows:
        click.echo(f"{row['id'].ljust(width)}  {row['type']:<6}  {row['package']}  "
                   f"{row['description']}".rstrip())


@a2a_agent.command("get")
@click.option("--id", "agent_id", required=True, help="The agent's id or alias.")
def get_agent(agent_id: str) -> None:
    """One agent's definition (its agent.toml, read), as JSON."""
    import attrs

    from agent_env.agents import find_agent

    definition = find_agent(agent_id)
    click.echo(json.dumps(attrs.asdict(definition), indent=2, default=str))

"""What ``env`` and ``a2a-agent`` share about deployments that outlive their command: list,
get-instance and teardown over the deployments ledger (:mod:`agent_env.deployments`), by kind.
"""

from __future__ import annotations

import json
from typing import Any

import click

from agent_env.cli.console import echo
from agent_env.errors import UserError, cause

#: kind -> (what people call it, the command group that deploys it, its listing command)
NOUNS = {"env": ("env", "env", "env list"),
         "agent": ("agent", "a2a-agent", "a2a-agent list-instances")}


def state(entry: Any) -> str:
    return "expired (agent-env gc removes it)" if entry.expired() else "live"


def list_kind(kind: str, as_json: bool, url_name: str) -> None:
    """``<group> list``: the deployments of ``kind`` with their expiry."""
    from agent_env.deployments import deployments

    noun, group, _ = NOUNS[kind]
    found = deployments().list(kind)
    if as_json:
        click.echo(json.dumps([{**d.to_json(), "expired": d.expired()} for d in found],
                              indent=2))
        return
    if not found:
        echo(f"No {noun}s are deployed (agent-env {group} deploy --id ID deploys one).")
        return
    for entry in found:
        echo(f"{entry.instance_id}  {entry.entity_id} v{entry.entity_version}  "
                   f"{entry.urls.get(url_name, '')}  expires "
                   f"{entry.expires_at.strftime('%Y-%m-%d %H:%M:%S')} UTC  {state(entry)}")


def get_kind(kind: str, instance_id: str) -> None:
    """``<group> get-instance``: one deployment as JSON (its token is never stored)."""
    from agent_env.deployments import deployments

    noun, _, listing = NOUNS[kind]
    entry = deployments().get(instance_id)
    if entry is None or entry.kind != kind:
        raise UserError(f"no deployed {noun} '{instance_id}' (agent-env {listing} shows them)")
    click.echo(json.dumps({**entry.to_json(), "expired": entry.expired()}, indent=2))


def teardown_kind(kind: str, instance_id: str | None, everything: bool) -> int:
    """``<group> teardown``: remove one deployment (or all of ``kind``) now; idempotent."""
    import asyncio

    from agent_env.deployments import deployments, tear_down

    noun = NOUNS[kind][0]
    if bool(instance_id) == everything:
        raise click.UsageError("give --id INSTANCE_ID or --all (one of them)")
    ledger = deployments()
    if everything:
        targets = ledger.list(kind)
        if not targets:
            echo(f"No {noun}s are deployed; nothing to tear down.")
            return 0
    else:
        found = ledger.get(instance_id or "")
        if found is None or found.kind != kind:
            echo(f"No deployed {noun} '{instance_id}' (already torn down, or never "
                       "deployed); nothing to do.")
            return 0
        targets = [found]
    code = 0
    for entry in targets:
        try:
            was_up = asyncio.run(tear_down(ledger, entry))
        except Exception as exc:  # keep going: one stuck sandbox must not keep the others up
            echo(f"Could not tear down {entry.instance_id}: {cause(exc)}",
                       err=True)
            code = 1
            continue
        echo(f"Tore down {entry.instance_id}." if was_up else
                   f"{entry.instance_id} was already gone; record removed.")
    return code

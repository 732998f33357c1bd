"""``agent-env config show``: which file is in effect and where each section came from."""

from __future__ import annotations

import json
from typing import Any

import click

from agent_env.cli.console import echo
from agent_env.config import mask
from agent_env.runtime import current


@click.group()
def config() -> None:
    """Inspect the configuration in effect."""


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def show_config(as_json: bool) -> None:
    """The file in effect, each section's source and values (secrets masked)."""
    cfg = current().config
    shown = mask(cfg.raw)
    if as_json:
        payload = {
            "format_version": 1,
            "file": str(cfg.path) if cfg.path else None,
            "state_root": str(cfg.state_root),
            "sources": cfg.sources,
            "values": shown,
            "warnings": list(cfg.warnings),
        }
        click.echo(json.dumps(payload, indent=2, default=str))
        return
    import tomlkit

    echo(f"Config file: {cfg.path or 'none (local defaults)'}")
    echo(f"State root: {cfg.state_root}")
    for name in sorted(shown):
        value = shown[name]
        echo()
        echo(f"# [{name}] from {cfg.sources.get(name, 'default')}")
        click.echo(tomlkit.dumps({name: value}).rstrip())


@config.command("explain")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def explain_config(path: str, as_json: bool) -> None:
    """One value (PATH like stores.object): what it is, as written, and where it came from."""
    from agent_env.errors import UserError

    cfg = current().config
    keys = path.split(".")
    value: object = cfg.data
    written: object = cfg.raw
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            known = ", ".join(sorted(value)) if isinstance(value, dict) else "none"
            raise UserError(f"config has no '{path}' (keys here: {known})")
        value = value[key]
        written = written.get(key) if isinstance(written, dict) else None
    source = cfg.sources.get(keys[0], "default")
    shown, shown_written = mask(value, keys[-1]), mask(written, keys[-1])
    if as_json:
        click.echo(json.dumps({"path": path, "value": shown, "written": shown_written,
                               "source": source}, indent=2, default=str))
        return
    click.echo(f"{path} = {json.dumps(shown, default=str)}")
    if shown_written != shown:
        click.echo(f"  written as {json.dumps(shown_written, default=str)}")
    echo(f"  from {source}")


def consulted_sources() -> list[dict[str, Any]]:
    """Every place config is read from, highest precedence first: ``configure()``, the
    ``AGENT_ENV_*`` variables, the file (``$AGENT_ENV_CONFIG`` or the nearest
    ``.agentenv/config.toml``, each folder looked at), ``env:NAME`` references, the state-root
    variables, and the built-in defaults. Values of set variables are masked when secret."""
    import os
    import re
    from pathlib import Path

    from agent_env.config import CONFIG_ENV, CONFIG_RELATIVE, ENV_VARIABLES

    cfg = current().config
    rows: list[dict[str, Any]] = [{"kind": "code", "name": "configure()", "used": any(
        "configure()" in s for s in cfg.sources.values()), "note": "overrides from code"}]
    for variable, (section, key) in ENV_VARIABLES.items():
        value = os.environ.get(variable)
        rows.append({"kind": "variable", "name": f"${variable}", "used": bool(value),
                     "value": mask(value, key) if value else None,
                     "note": f"sets {section}.{key}"})
    named = os.environ.get(CONFIG_ENV)
    rows.append({"kind": "variable", "name": f"${CONFIG_ENV}", "used": bool(named),
                 "value": named or None, "note": "names the config file"})
    if not named:
        folder = Path.cwd().resolve()
        for candidate in (folder, *folder.parents):
            path = candidate / CONFIG_RELATIVE
            rows.append({"kind": "file", "name": str(path), "used": cfg.path == path,
                         "note": "found" if path.is_file() else "absent"})
            if path.is_file():
                break
    elif cfg.path is not None:
        rows.append({"kind": "file", "name": str(cfg.path), "used": True, "note": "found"})
    references = sorted(set(re.findall(r"env:([A-Za-z_][A-Za-z0-9_]*)", json.dumps(cfg.raw))))
    for name in references:
        rows.append({"kind": "variable", "name": f"${name}", "used": name in os.environ,
                     "note": "an env: reference in the file"})
    for variable in ("AGENT_ENV_STATE_DIR", "XDG_STATE_HOME"):
        rows.append({"kind": "variable", "name": f"${variable}",
                     "used": bool(os.environ.get(variable)),
                     "value": os.environ.get(variable) or None,
                     "note": "the state root, when [state] root is not set"})
    rows.append({"kind": "default", "name": "built-in defaults", "used": True,
                 "note": "local stores and sandbox chain, where nothing above sets them"})
    return rows


@config.command("sources")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def sources(as_json: bool) -> None:
    """Every file and variable config is read from, highest precedence first."""
    rows = consulted_sources()
    if as_json:
        click.echo(json.dumps({"format_version": 1, "sources": rows}, indent=2, default=str))
        return
    echo("Config sources, highest precedence first (* = in use):")
    for index, row in enumerate(rows, start=1):
        value = f" = {row['value']}" if row.get("value") else ""
        echo(f" {'*' if row['used'] else ' '} {index:2}. {row['name']}{value}  "
                   f"({row['note']})")


@config.command("debug")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def debug(as_json: bool) -> None:
    """What to paste into a bug report: versions, config file, sources, stores, sandboxes."""
    import platform
    import sys

    from agent_env._version import VERSION

    cfg = current().config
    used = [row for row in consulted_sources() if row["used"]]
    payload: dict[str, Any] = {
        "agent_env": VERSION, "python": sys.version.split()[0],
        "platform": platform.platform(), "file": str(cfg.path) if cfg.path else None,
        "state_root": str(cfg.state_root),
        "stores": {kind: cfg.store(kind).backend for kind in
                   ("document", "object", "image", "secret")},
        "sandbox_chain": cfg.sandbox_chain(), "warnings": list(cfg.warnings),
        "sources": used,
    }
    if as_json:
        click.echo(json.dumps(payload, indent=2, default=str))
        return
    for key, value in payload.items():
        if key != "sources":
            echo(f"{key}: {value}")
    echo("sources in use:")
    for row in used:
        shown = f" = {row['value']}" if row.get("value") else ""
        echo(f"  {row['name']}{shown}  ({row['note']})")

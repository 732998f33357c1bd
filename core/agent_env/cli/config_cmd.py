"""``agent-env config show``: which file is in effect and where each section came from."""

from __future__ import annotations

import json

import click

from agent_env.config import get_config, mask


@click.group()
def config() -> None:
    """Inspect the configuration in effect."""


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def show_config(as_json: bool) -> None:
    """The file in effect, each section's source and values (secrets masked)."""
    cfg = get_config()
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

    click.echo(f"Config file: {cfg.path or 'none (local defaults)'}")
    click.echo(f"State root: {cfg.state_root}")
    for name in sorted(shown):
        value = shown[name]
        click.echo()
        click.echo(f"# [{name}] from {cfg.sources.get(name, 'default')}")
        click.echo(tomlkit.dumps({name: value}).rstrip())


@config.command("explain")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def explain_config(path: str, as_json: bool) -> None:
    """One value (PATH like stores.object): what it is, as written, and where it came from."""
    from agent_env.errors import UserError

    cfg = get_config()
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
    click.echo(f"  from {source}")

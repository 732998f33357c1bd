"""``plugin add`` / ``plugin remove``: change the Python environment agent-env runs in, safely.

The installer is the one that owns the environment (uv for a uv-made venv or uv tool, else pip),
always aimed at ``sys.executable``. ``add`` snapshots the installed distributions first, checks in
a fresh process that every new plugin loads, and otherwise puts the environment back exactly as
it was (removes what came in, reinstalls what changed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import attrs
import click

from agent_env.errors import UserError
from agent_env.plugins import INSTALLERS
from agent_env.plugins.catalog import by_short_name
from agent_env.plugins.discovery import CORE_DISTRIBUTION, normalise

PROTECTED = {normalise(CORE_DISTRIBUTION), normalise("agentenv-framework-protocol")}


@attrs.frozen
class Installed:
    """One installed distribution, with what it takes to reinstall it exactly."""

    name: str
    version: str
    url: str | None = None
    editable: bool = False

    def reinstall_spec(self) -> list[str]:
        if self.url and self.url.startswith("file://"):
            path = self.url[len("file://") :]
            return ["-e", path] if self.editable else [path]
        if self.url:
            return [self.url]
        return [f"{self.name}=={self.version}"]


_SNAPSHOT_CODE = """
import json, importlib.metadata as m
out = {}
for d in m.distributions():
    name = d.metadata["Name"]
    direct = d.read_text("direct_url.json")
    url = editable = None
    if direct:
        info = json.loads(direct)
        url = info.get("url")
        editable = bool(info.get("dir_info", {}).get("editable"))
    out[name] = [d.version, url, editable]
print(json.dumps(out))
"""


def snapshot() -> dict[str, Installed]:
    """The distributions installed in this environment, read in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _SNAPSHOT_CODE], capture_output=True, text=True, check=True
    )
    raw = json.loads(done.stdout)
    return {
        normalise(name): Installed(name, version, url, bool(editable))
        for name, (version, url, editable) in raw.items()
    }


def installer_command(forced: str | None = None) -> list[str]:
    """The installer that owns this environment (or the ``forced`` one), as an argv prefix."""
    if forced is not None:
        return _forced_installer(forced)
    prefix = Path(sys.prefix)
    cfg = prefix / "pyvenv.cfg"
    made_by_uv = cfg.is_file() and re.search(r"^uv\s*=", cfg.read_text(), re.MULTILINE)
    is_uv_tool = (prefix / "uv-receipt.toml").is_file()
    uv = shutil.which("uv") or _venv_uv()
    if made_by_uv or is_uv_tool:
        if not uv:
            raise UserError(
                f"{sys.prefix} is managed by uv, but uv is not on PATH (install uv, or put it "
                "on PATH, and run plugin add again)"
            )
        return [uv, "pip"]
    return [sys.executable, "-m", "pip"]


def _forced_installer(name: str) -> list[str]:
    if name == "pip":
        return [sys.executable, "-m", "pip"]
    if name == "pipx":
        raise UserError("--installer pipx: pipx installs applications into environments of "
                        f"their own; plugins go into agent-env's, {sys.prefix} (use pip or uv)")
    if name not in INSTALLERS:
        raise UserError(f"--installer {name}: not an installer (one of {', '.join(INSTALLERS)})")
    uv = shutil.which("uv") or _venv_uv()
    if not uv:
        raise UserError(f"--installer {name}: uv is not on PATH (install uv, or use pip)")
    return [uv, "pip"]


def _venv_uv() -> str | None:
    candidate = Path(sys.executable).parent / "uv"
    return str(candidate) if candidate.is_file() else None


def _run_installer(verb: str, args: list[str], *, forced: str | None = None,
                   index_url: str | None = None) -> None:
    command = installer_command(forced)
    full = [*command, verb]
    if command[-1] == "pip" and command[0] != sys.executable:  # uv pip
        full += ["--python", sys.executable]
    if verb == "uninstall" and command[0] == sys.executable:
        full.append("-y")
    if index_url and verb == "install":
        full += ["--index-url", index_url]
    full += args
    click.echo(f"$ {' '.join(full)}", err=True)
    done = subprocess.run(full)
    if done.returncode != 0:
        raise UserError(f"the installer failed ({' '.join(full[:3])} exit {done.returncode})")


def refuse_externally_managed() -> None:
    """PEP 668: never pip-install into a system Python that says it is externally managed."""
    if sys.prefix != sys.base_prefix:
        return
    marker = Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED"
    if marker.is_file():
        raise UserError(
            f"{sys.executable} is an externally managed Python (PEP 668); install agent-env "
            "in a virtualenv (python3 -m venv .venv && .venv/bin/pip install agentenv-framework) "
            "or with 'uv tool install agentenv-framework', and run plugin add from there"
        )


def _spec_name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    return normalise(match.group(1)) if match else ""


def _checkout_root() -> Path | None:
    import agent_env

    root = Path(agent_env.__file__).resolve().parents[2]
    return root if (root / "plugins").is_dir() and (root / "pyproject.toml").is_file() else None


def resolve_specs(specs: list[str]) -> list[str]:
    """Map first-party short names to their folders in a checkout; refuse the core."""
    resolved = []
    root = _checkout_root()
    for spec in specs:
        _check_spec(spec)
        if not Path(spec).exists() and _spec_name(spec) in PROTECTED:
            raise UserError(
                f"'{spec}' is agent-env itself, not a plugin; upgrade it with your installer "
                "instead of plugin add"
            )
        first_party = by_short_name(spec)
        if first_party is not None:
            folder = root / "plugins" / first_party.short_name if root else None
            if folder is not None and (folder / "pyproject.toml").is_file():
                resolved.append(str(folder))
                continue
            resolved.append(first_party.distribution)
            continue
        resolved.append(spec)
    return resolved


def _check_spec(spec: str) -> None:
    """Refuse what no installer could install, before a plan is shown: an empty spec, or a
    path (it starts with ``.``, ``/`` or ``~``, or names a wheel or sdist) that does not
    exist."""
    if not spec.strip():
        raise UserError("an empty plugin spec: name a plugin (agent-env plugin add docker_env), "
                        "a folder, a wheel or a requirement")
    looks_like_path = spec.startswith((".", "/", "~")) or spec.endswith(
        (".whl", ".tar.gz", ".zip"))
    if looks_like_path and not Path(spec).expanduser().exists():
        raise UserError(f"no such file or folder: {spec} (give the path of a plugin's folder, "
                        "wheel or sdist)")


def add(specs: list[str], *, dry_run: bool = False, assume_yes: bool = False,
        installer: str | None = None, index_url: str | None = None,
        keep: bool = False) -> None:
    """Install ``specs``, verify the new plugins load, roll back exactly if they don't
    (``keep``: keep them anyway, saying which did not load). ``installer`` forces one
    (``--installer``), ``index_url`` is where it resolves from."""
    refuse_externally_managed()
    targets = resolve_specs(specs)
    click.echo(f"Plan: install {' '.join(targets)} into {sys.prefix}")
    click.echo(f"Installer: {' '.join(installer_command(installer))}"
               + (f" (index {index_url})" if index_url else ""))
    if dry_run:
        click.echo("Dry run: nothing changed.")
        return
    if not assume_yes and not click.confirm("Proceed?", default=False):
        raise UserError("nothing installed (answer y, or pass -y)")
    before = snapshot()
    args: list[str] = []
    for target in targets:
        args += ["-e", target] if Path(target).is_dir() else [target]
    try:
        _run_installer("install", args, forced=installer, index_url=index_url)
        after = snapshot()
        added = sorted(set(after) - set(before))
        problems = verify_plugins_load([after[n].name for n in added])
    except (UserError, KeyboardInterrupt):
        restore(before, forced=installer, index_url=index_url)
        raise
    if problems and keep:
        for problem in problems:
            click.echo(f"warning: kept, but it does not take effect: {problem}", err=True)
    elif problems:
        restore(before, forced=installer, index_url=index_url)
        raise UserError(
            "the new plugin did not load, so the environment was restored (--keep keeps it): "
            + "; ".join(problems)
        )
    click.echo(f"Added {', '.join(after[n].name + ' ' + after[n].version for n in added)}.")


def verify_plugins_load(distributions: list[str]) -> list[str]:
    """Ask a fresh agent-env process whether the named distributions' plugins are active."""
    env = dict(os.environ)
    env.pop("AGENT_ENV_PLUGINS", None)
    done = subprocess.run(
        [sys.executable, "-m", "agent_env", "plugin", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        return [f"agent-env plugin list failed: {done.stderr.strip()[-300:]}"]
    rows = {normalise(r["package"]): r for r in json.loads(done.stdout)["plugins"]}
    problems = []
    for name in distributions:
        row = rows.get(normalise(name))
        if row is None:
            continue  # a plain dependency, not a plugin
        if row["status"] != "active":
            problems.append(f"{name}: {row['status']} ({row['reason']}: {row['detail']})")
    return problems


def restore(before: dict[str, Installed], *, forced: str | None = None,
            index_url: str | None = None) -> None:
    """Put the environment back to ``before``: remove newcomers, reinstall what changed."""
    now = snapshot()
    extra = [now[n].name for n in sorted(set(now) - set(before))]
    if extra:
        _run_installer("uninstall", extra, forced=forced)
    changed = [before[n] for n in before if n in now and now[n] != before[n]]
    missing = [before[n] for n in before if n not in now]
    for dist in [*changed, *missing]:
        _run_installer("install", ["--no-deps", *dist.reinstall_spec()], forced=forced,
                       index_url=index_url)


def _uses(provides: list[dict[str, str]]) -> list[str]:
    """What in the config or the stored tasks still uses any of ``provides``."""
    from agent_env.runtime import current

    config = current().config
    uses = []
    for item in provides:
        kind, name = item["kind"], item["name"]
        if kind == "store":
            store_kind, backend = name.split(":", 1)
            if config.store(store_kind).backend == backend:
                uses.append(f"the config's [stores] {store_kind} = '{backend}'")
        if kind == "sandbox_provider":
            if name in config.sandbox_chain() or name in config.sandbox_chain(agent=True):
                uses.append(f"the config's [sandbox] chain names '{name}'")
    step_types = {i["name"] for i in provides if i["kind"] == "step_type"}
    providers = {i["name"] for i in provides if i["kind"] == "sandbox_provider"}
    if step_types or providers:
        uses.extend(_stored_task_uses(step_types, providers))
    return uses


def _stored_task_uses(step_types: set[str], providers: set[str]) -> list[str]:
    """Stored tasks (latest versions) whose steps name one of these step types or providers."""
    from agent_env.runtime import current

    store = current().versioned_store
    uses = []
    for task_id in store.list_ids("tasks"):
        record = store.get("tasks", task_id)
        steps = record.body.get("steps", []) if record and isinstance(record.body, dict) else []
        for step in steps:
            if not isinstance(step, dict):
                continue
            if step.get("type") in step_types:
                uses.append(f"stored task '{task_id}' uses step type '{step['type']}'")
            elif step.get("sandbox_type") in providers:
                uses.append(f"stored task '{task_id}' uses sandbox '{step['sandbox_type']}'")
    return uses


def remove(names: list[str], *, force: bool = False, assume_yes: bool = False) -> None:
    """Uninstall plugin distributions; blocked while config or stored tasks use them."""
    refuse_externally_managed()
    from agent_env.plugins.reporting import find_row, package_rows
    from agent_env.runtime import current

    rows = package_rows(current().host)
    distributions = []
    for name in names:
        first_party = by_short_name(name)
        row = find_row(first_party.distribution if first_party else name, rows)
        if normalise(row["package"]) in PROTECTED:
            raise UserError(f"'{row['package']}' is agent-env itself and cannot be removed")
        uses = _uses(row["provides"])
        if uses and not force:
            raise UserError(
                f"{row['package']} is still in use: {'; '.join(uses)} "
                "(change those first, or pass --force)"
            )
        distributions.append(row["package"])
    click.echo(f"Plan: uninstall {' '.join(distributions)} from {sys.prefix}")
    if not assume_yes and not click.confirm("Proceed?", default=False):
        raise UserError("nothing removed (answer y, or pass -y)")
    _run_installer("uninstall", distributions)
    click.echo(f"Removed {', '.join(distributions)}.")

"""ARCHITECTURE.md against the code, as Datasette tests its docs: the hook table cannot drift."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click
import pytest

from agent_env import hookspecs
from agent_env.plugins import CONTRIBUTION_HOOKS, PluginHost
from agent_env.plugins.catalog import by_short_name
from agent_env.plugins.discovery import entry_points

ROOT = Path(__file__).resolve().parents[3]
ROW = re.compile(r"^\| `(agent_env_\w+)\((.*?)\) -> (.*?)` \| (.*?) \| (.*?) \|$", re.MULTILINE)
ENTRY = re.compile(r"(\w+)(?: \(([^)]*)\))?")
HOOKS = {name: fn for name, fn in vars(hookspecs).items() if name.startswith("agent_env_")}
KIND_OF_HOOK = {hook: kind for kind, (hook, _) in CONTRIBUTION_HOOKS.items()}


def rows() -> dict[str, tuple[str, str, str]]:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    return {m[1]: (m[2], m[3], m[5]) for m in ROW.finditer(text)}


def signature(name: str) -> tuple[str, str]:
    found = inspect.signature(HOOKS[name])
    params = ", ".join(f"{p.name}: {p.annotation}" for p in found.parameters.values())
    return params, str(found.return_annotation)


def implementers(cell: str) -> dict[str, list[str]]:
    """``core (`a`, `b`), mcp_env`` -> {"core": ["a", "b"], "mcp_env": []}."""
    if cell.startswith("none"):
        return {}
    found = {}
    for match in ENTRY.finditer(cell):
        names = re.findall(r"`([^`]+)`", match[2] or "")
        found[match[1]] = names
        if match.end() < len(cell) and cell[match.end():match.end() + 2] != ", ":
            pytest.fail(f"cannot read {cell!r}: write 'plugin (`name`, ...)' entries")
    return found


@pytest.fixture(scope="module")
def host() -> PluginHost:
    names = {record.distribution for record, _ in entry_points()}
    host = PluginHost(only=names)  # every installed plugin, whatever AGENT_ENV_PLUGINS says
    host.load()
    host.extend_cli(click.Group("agent-env"))
    return host


def test_every_hookspec_has_its_row_with_the_exact_signature() -> None:
    documented = rows()
    assert set(documented) == set(HOOKS)
    for name, (params, returns, _) in documented.items():
        assert (params, returns) == signature(name), name


def _short_name(host: PluginHost, module: str) -> str:
    """``core`` for a built-in plugin module, else its first-party plugin's short name."""
    from agent_env.plugins.catalog import FIRST_PARTY

    record = next(r for r in host.records if r.name == module)
    if record.builtin:
        return "core"
    found = [p.short_name for p in FIRST_PARTY if p.distribution == record.distribution]
    return found[0] if found else record.distribution


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_who_implements_it_is_true(hook: str, host: PluginHost) -> None:
    """The row lists every plugin that implements the hook, each with exactly the names it
    contributes: no contribution can go unlisted."""
    cell = rows()[hook][2]
    listed = implementers(cell)
    impls = {i.plugin_name for i in getattr(host.pm.hook, hook).get_hookimpls()}
    implementing = {_short_name(host, m) for m in impls if any(r.name == m for r in host.records)}
    assert implementing == set(listed), f"{hook}: implemented by {sorted(implementing)}"
    for plugin, names in listed.items():
        if plugin == "core":
            modules = {r.name for r in host.records if r.builtin}
        else:
            first_party = by_short_name(plugin)
            assert first_party is not None, f"{plugin} is not a first-party plugin"
            modules = {r.name for r in host.records if r.distribution == first_party.distribution}
        impls = {i.plugin_name for i in getattr(host.pm.hook, hook).get_hookimpls()}
        assert modules & impls, f"{plugin} does not implement {hook}"
        kind = "cli_command" if hook == "agent_env_cli" else KIND_OF_HOOK.get(hook, "")
        if names:
            contributed = {c.name for c in host.all_contributions()
                           if c.kind == kind and c.plugin in modules}
            assert set(names) == contributed, f"{plugin} contributes {sorted(contributed)} ({hook})"

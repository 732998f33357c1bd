"""The plugin manager: finds plugins, loads them safely and builds the registries.

Plugins are modules named by entry points in the ``agent_env`` group. The kernel's own features
are registered the same way, from :data:`BUILTIN_PLUGINS`, so there is one path for everything.

Loading is defensive because one broken plugin must never take the CLI down:

* a plugin whose distribution requires an ``agentenv-framework`` version that excludes the
  running one is refused as ``incompatible-core`` *before* it is imported;
* a plugin that raises while importing is recorded as ``failed`` with the reason and skipped;
* what a plugin prints while importing or answering a hook goes to stderr (``--json`` stays clean);
* a contributed name claimed by two plugins is left out for both (``conflict``), and a plugin
  may not take a name a built-in plugin uses (``skipped``).

Two environment switches keep plugins debuggable and tests hermetic: ``AGENT_ENV_PLUGINS=a,b``
loads only the named outside plugins, and ``AGENT_ENV_TRACE_PLUGINS=1`` prints every hook call.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import attrs
import pluggy

from agent_env import hookspecs

ENTRY_POINT_GROUP = "agent_env"
CORE_DISTRIBUTION = "agentenv-framework"

#: The kernel's own plugins, registered exactly like outside ones (as pytest's default_plugins).
BUILTIN_PLUGINS: tuple[str, ...] = (
    "agent_env.cli.builtin_commands",
    "agent_env.stores.builtin",
    "agent_env.sandbox.local",
    "agent_env.tasks.builtin_steps",
    "agent_env.bundles.shipped",
)

# Statuses shown by ``agent-env plugin list``; reasons are stable codes for ``--json``.
ACTIVE, FAILED, SKIPPED, CONFLICT, UNLOADED = "active", "failed", "skipped", "conflict", "unloaded"

#: contribution kind -> (hook name, how to read the contributed name)
CONTRIBUTION_HOOKS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "env_type": ("agent_env_env_types", lambda c: c.name),
    "sandbox_provider": ("agent_env_sandbox_providers", lambda c: c.name),
    "step_type": ("agent_env_step_types", lambda c: c.type),
    "store": ("agent_env_stores", lambda c: f"{c.kind}:{c.name}"),
    "bundle": ("agent_env_bundles", lambda c: c.name),
}


@attrs.define
class PluginRecord:
    """One plugin module and what became of it."""

    name: str
    distribution: str
    version: str
    module: str
    builtin: bool = False
    status: str = UNLOADED
    reason: str | None = None
    detail: str | None = None
    traceback: str | None = attrs.field(default=None, repr=False)
    plugin: ModuleType | None = attrs.field(default=None, repr=False)


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


def core_version() -> str:
    from agent_env._version import VERSION

    return VERSION


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names_from_env(variable: str) -> set[str] | None:
    raw = os.environ.get(variable)
    if raw is None:
        return None
    return {_normalise(part) for part in raw.split(",") if part.strip()}


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    with contextlib.redirect_stdout(sys.stderr):
        yield


class PluginHost:
    """Owns the pluggy manager, the plugin records and the name registries built from hooks."""

    def __init__(
        self,
        *,
        builtin: tuple[str, ...] = BUILTIN_PLUGINS,
        disabled: set[str] | None = None,
        only: set[str] | None = None,
        discover: bool = True,
    ) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.records: list[PluginRecord] = []
        self._builtin = builtin
        self._disabled = {_normalise(n) for n in (disabled or set())}
        env_only = _names_from_env("AGENT_ENV_PLUGINS")
        self._only = {_normalise(n) for n in only} if only is not None else env_only
        self._discover = discover
        self._registries: dict[str, dict[str, Any]] = {}
        self._contributions: dict[str, list[Contribution]] = {}
        self._cli_contributions: list[Contribution] = []
        self._loaded = False
        self._configured = False
        self.trace = os.environ.get("AGENT_ENV_TRACE_PLUGINS", "") not in ("", "0")
        if self.trace:
            self.pm.trace.root.setwriter(lambda text: sys.stderr.write(f"[plugins] {text}"))
            self.pm.enable_tracing()

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Register the built-ins and every discovered plugin (once)."""
        if self._loaded:
            return
        self._loaded = True
        version = core_version()
        for module in self._builtin:
            record = PluginRecord(module, CORE_DISTRIBUTION, version, module, builtin=True)
            self.records.append(record)
            if self._is_disabled(record):
                record.status, record.reason = SKIPPED, "disabled"
                continue
            # A built-in that fails to import is a defect in the kernel: let it raise.
            self._register(record, importlib.import_module(module))
        if self._discover:
            for record, entry_point in self._discover_entry_points():
                self.records.append(record)
                self._load_entry_point(record, entry_point, version)

    def _discover_entry_points(self) -> Iterator[tuple[PluginRecord, Any]]:
        from importlib import metadata

        seen: set[tuple[str, str]] = set()
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = entry_point.dist
            dist_name = dist.metadata["Name"] if dist is not None else "?"
            key = (dist_name, entry_point.name)
            if key in seen:  # the same distribution seen twice on sys.path
                continue
            seen.add(key)
            version = dist.version if dist is not None else "?"
            record = PluginRecord(entry_point.name, dist_name, version, entry_point.value)
            record.plugin = None
            yield record, entry_point

    def _is_disabled(self, record: PluginRecord) -> bool:
        names = {_normalise(record.name), _normalise(record.distribution)}
        return bool(names & self._disabled) and not (
            record.builtin and _normalise(record.distribution) in self._disabled
        )

    def _load_entry_point(self, record: PluginRecord, entry_point: Any, version: str) -> None:
        if self._is_disabled(record):
            record.status, record.reason = SKIPPED, "disabled"
            record.detail = "turned off with -p no:NAME"
            return
        if self._only is not None and not (
            {_normalise(record.name), _normalise(record.distribution)} & self._only
        ):
            record.status, record.reason = UNLOADED, "not-selected"
            record.detail = "not named in AGENT_ENV_PLUGINS"
            return
        problem = _core_requirement_problem(entry_point.dist, version)
        if problem:
            record.status, record.reason, record.detail = FAILED, "incompatible-core", problem
            return
        try:
            with _stdout_to_stderr():
                module = entry_point.load()
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            record.status, record.reason = FAILED, "import-error"
            record.detail = f"{type(exc).__name__}: {exc}"
            record.traceback = traceback.format_exc()
            return
        self._register(record, module)

    def _register(self, record: PluginRecord, module: ModuleType) -> None:
        try:
            self.pm.register(module, name=record.name)
        except Exception as exc:
            record.status, record.reason = FAILED, "bad-hook"
            record.detail = f"{type(exc).__name__}: {exc}"
            return
        record.plugin = module
        record.status = ACTIVE

    def record(self, name: str) -> PluginRecord | None:
        self.load()
        for record in self.records:
            if record.name == name:
                return record
        return None

    # -- configuration ---------------------------------------------------------------------

    def configure(self, tables: dict[str, dict[str, Any]]) -> None:
        """Hand each plugin its ``[plugins.<distribution>]`` table (once)."""
        self.load()
        if self._configured:
            return
        self._configured = True
        by_dist = {_normalise(k): v for k, v in tables.items()}
        for impl in self.pm.hook.agent_env_configure.get_hookimpls():
            record = self.record(impl.plugin_name)
            dist = record.distribution if record else impl.plugin_name
            settings = dict(by_dist.get(_normalise(dist), {}))
            self._call(impl, record, {"settings": settings})

    # -- registries ------------------------------------------------------------------------

    def _call(self, impl: Any, record: PluginRecord | None, kwargs: dict[str, Any]) -> Any:
        if self.trace:
            sys.stderr.write(f"[plugins] {impl.plugin_name}.{impl.function.__name__}()\n")
        try:
            with _stdout_to_stderr():
                return impl.function(**kwargs)
        except Exception as exc:
            if record is None or record.builtin:
                raise
            record.status, record.reason = FAILED, "hook-error"
            record.detail = f"{impl.function.__name__}: {type(exc).__name__}: {exc}"
            return None

    def contributions(self, kind: str) -> list[Contribution]:
        """Every contribution of ``kind`` with its status (conflicts included)."""
        self.load()
        if kind in self._contributions:
            return self._contributions[kind]
        hook_name, key = CONTRIBUTION_HOOKS[kind]
        found: list[Contribution] = []
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            record = self.record(impl.plugin_name)
            result = self._call(impl, record, {})
            for obj in result or ():
                try:
                    name = key(obj)
                except AttributeError:
                    if record is not None and not record.builtin:
                        record.status, record.reason = FAILED, "bad-contribution"
                        record.detail = f"{hook_name} returned {obj!r} without a name"
                        continue
                    raise
                found.append(Contribution(kind, name, impl.plugin_name, obj=obj))
        self._contributions[kind] = _resolve_conflicts(found, self._builtin_names())
        return self._contributions[kind]

    def _builtin_names(self) -> set[str]:
        return {r.name for r in self.records if r.builtin}

    def registry(self, kind: str) -> dict[str, Any]:
        """Name -> contributed object, for the contributions of ``kind`` that are in effect."""
        if kind not in self._registries:
            self._registries[kind] = {
                c.name: c.obj for c in self.contributions(kind) if c.status == ACTIVE
            }
        return self._registries[kind]

    def all_contributions(self) -> list[Contribution]:
        out: list[Contribution] = []
        for kind in CONTRIBUTION_HOOKS:
            out.extend(self.contributions(kind))
        out.extend(self._cli_contributions)
        return out

    # -- the command line ------------------------------------------------------------------

    def extend_cli(self, cli: Any) -> None:
        """Let plugins add commands; a name the core (or another plugin) has is not taken."""
        self.load()
        self._cli_contributions = []
        builtin = self._builtin_names()
        core_names = set(cli.commands)
        added: dict[str, list[tuple[str, Any]]] = {}
        for impl in self.pm.hook.agent_env_cli.get_hookimpls():
            record = self.record(impl.plugin_name)
            before = dict(cli.commands)
            self._call(impl, record, {"cli": cli})
            for name, command in list(cli.commands.items()):
                if before.get(name) is not command:
                    added.setdefault(name, []).append((impl.plugin_name, command))
            cli.commands.clear()
            cli.commands.update(before)
            if impl.plugin_name in builtin:  # the core's own commands go in at once
                for name, claims in added.items():
                    for plugin, command in claims:
                        if plugin == impl.plugin_name:
                            cli.commands[name] = command
                            core_names.add(name)
        for name, claims in added.items():
            outside = [(p, c) for p, c in claims if p not in builtin]
            for plugin, command in claims:
                contribution = Contribution("cli_command", name, plugin, obj=command)
                if plugin in builtin:
                    pass
                elif name in core_names:
                    contribution.status, contribution.reason = SKIPPED, "shadows-builtin"
                    contribution.detail = f"the core already has the '{name}' command"
                elif len(outside) > 1:
                    others = sorted(p for p, _ in outside if p != plugin)
                    contribution.status, contribution.reason = CONFLICT, "name-conflict"
                    contribution.detail = f"also provided by {', '.join(others)}"
                else:
                    cli.commands[name] = command
                self._cli_contributions.append(contribution)

    # -- events ----------------------------------------------------------------------------

    def emit(self, event: Any) -> None:
        """Deliver a run event to every observer; an observer's error is logged, never raised."""
        for impl in self.pm.hook.agent_env_run_event.get_hookimpls():
            try:
                with _stdout_to_stderr():
                    impl.function(event=event)
            except Exception:
                from agent_env.logs import get_logger

                get_logger("plugins").warning(
                    "run-event observer failed", plugin=impl.plugin_name, exc_info=True
                )


def _resolve_conflicts(found: list[Contribution], builtin: set[str]) -> list[Contribution]:
    claims: dict[str, list[Contribution]] = {}
    for contribution in found:
        claims.setdefault(contribution.name, []).append(contribution)
    for name, group in claims.items():
        in_core = any(c.plugin in builtin for c in group)
        outside = [c for c in group if c.plugin not in builtin]
        for contribution in outside:
            if in_core:
                contribution.status, contribution.reason = SKIPPED, "shadows-builtin"
                contribution.detail = f"'{name}' is a built-in name"
            elif len({c.plugin for c in outside}) > 1:
                others = sorted({c.plugin for c in outside} - {contribution.plugin})
                contribution.status, contribution.reason = CONFLICT, "name-conflict"
                contribution.detail = f"also provided by {', '.join(others)}"
    return found


def _core_requirement_problem(dist: Any, version: str) -> str | None:
    """Why the plugin's requirement on the core excludes ``version`` (None when it doesn't)."""
    if dist is None:
        return None
    for text in dist.requires or ():
        if not re.match(r"\s*agentenv[-_.]framework\s*(?![-_.\w])", text, re.IGNORECASE):
            continue
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion, Version

        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            ok = requirement.specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            return None
        if not ok:
            return f"needs agentenv-framework{requirement.specifier}, this is {version}"
    return None


_HOST: PluginHost | None = None


def get_host() -> PluginHost:
    """The process's plugin host, loaded on first use."""
    global _HOST
    if _HOST is None:
        _HOST = PluginHost(disabled=set(_DISABLED))
        _HOST.load()
    return _HOST


_DISABLED: list[str] = []


def disable(names: list[str]) -> None:
    """Turn plugins off for this process (``agent-env -p no:NAME``); call before first use."""
    _DISABLED.extend(names)


def reset_host() -> None:
    """Forget the loaded plugins (tests, and ``plugin add`` before it re-checks)."""
    global _HOST
    _HOST = None
    _DISABLED.clear()

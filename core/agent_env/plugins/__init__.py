"""The plugin host: one pluggy manager, the plugins it loaded, and the registries built from them.

Plugins are modules named by entry points in the ``agent_env`` group; the kernel's own features
are registered the same way, from :data:`BUILTIN_PLUGINS`, so there is one path for everything.
The concerns live in their own modules: :mod:`.discovery` (finding and loading plugins),
:mod:`.registries` (which name is in effect), :mod:`.reporting` (telling people), and
:mod:`.catalog` (the first-party plugins, for install hints).

Every hook is called through pluggy's own hook calling, so ordering (``tryfirst``/``trylast``),
wrappers and ``AGENT_ENV_TRACE_PLUGINS=1`` (pluggy's tracing) apply to all of them. What the
kernel adds is written once, in :meth:`PluginHost._guard`, around each plain implementation:
its prints go to stderr, and an outside plugin that raises is marked ``failed`` and skipped
instead of taking the run down (a built-in that raises is a kernel defect and propagates).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pluggy

from agent_env import hookspecs
from agent_env.contributions import Lazy, StoreBackend
from agent_env.errors import MissingPluginError, UserError
from agent_env.plugins.discovery import (
    ACTIVE,
    BUILTIN_PLUGINS,
    CONFLICT,
    CORE_DISTRIBUTION,
    ENTRY_POINT_GROUP,
    FAILED,
    SKIPPED,
    UNLOADED,
    PluginRecord,
    core_version,
    entry_points,
    load_entry_point,
    names_from_env,
    normalise,
    stdout_to_stderr,
)
from agent_env.plugins.registries import (
    CLI_COMMAND,
    CONTRIBUTION_HOOKS,
    ClaimingGroup,
    Contribution,
    Registry,
    resolve_conflicts,
)

__all__ = [
    "ACTIVE",
    "BUILTIN_PLUGINS",
    "CONFLICT",
    "CONTRIBUTION_HOOKS",
    "CORE_DISTRIBUTION",
    "ENTRY_POINT_GROUP",
    "FAILED",
    "SKIPPED",
    "UNLOADED",
    "Contribution",
    "PluginHost",
    "PluginRecord",
]

TablesSource = Callable[[], dict[str, dict[str, Any]]]


#: ``plugin add --installer``: the reference's names; each installs into this agent-env's own
#: environment (``uv-project`` and ``uv-tool`` through ``uv pip``; ``pipx`` is refused). Here,
#: not in the installer, so the CLI lists them without importing it.
INSTALLERS = ("pip", "uv", "uv-project", "uv-tool", "pipx")


class PluginHost:
    """Owns the pluggy manager, the plugin records and the name registries built from hooks.

    ``settings`` returns the ``[plugins.*]`` tables; the host hands each plugin its own table
    through ``agent_env_configure`` before the first contribution is read. One host belongs
    to one :class:`agent_env.runtime.Runtime`.
    """

    def __init__(
        self,
        *,
        builtin: tuple[str, ...] = BUILTIN_PLUGINS,
        disabled: set[str] | None = None,
        only: set[str] | None = None,
        discover: bool = True,
        settings: TablesSource | None = None,
    ) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.records: list[PluginRecord] = []
        self.unknown_tables: list[str] = []
        self._builtin = builtin
        self._disabled = {normalise(n) for n in (disabled or set())}
        selected = names_from_env("AGENT_ENV_PLUGINS") if only is None else only
        self._only = {normalise(n) for n in selected} if selected is not None else None
        self._discover = discover
        self._settings = settings
        self._registries: dict[str, Registry] = {}
        self._contributions: dict[str, list[Contribution]] = {}
        self._cli_contributions: list[Contribution] = []
        self._returned_by: dict[int, str] = {}
        self._calling: list[str] = []
        self._lock = threading.RLock()
        self._loaded = False
        self._configured = False
        if os.environ.get("AGENT_ENV_TRACE_PLUGINS", "") not in ("", "0"):
            self.pm.trace.root.setwriter(lambda text: sys.stderr.write(f"[plugins] {text}"))
            self.pm.enable_tracing()

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Register the built-ins and every discovered plugin (once)."""
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            version = core_version()
            for module in self._builtin:
                record = PluginRecord(module, CORE_DISTRIBUTION, version, module, builtin=True)
                self.records.append(record)
                if normalise(module) in self._disabled:
                    record.status, record.reason = SKIPPED, "disabled"
                    continue
                # A built-in that fails to import is a defect in the kernel: let it raise.
                self._register(record, importlib.import_module(module))
            if not self._discover:
                return
            for record, entry_point in entry_points():
                self.records.append(record)
                loaded = load_entry_point(
                    record, entry_point, disabled=self._disabled, only=self._only
                )
                if loaded is not None:
                    self._register(record, loaded)
            self._say_unmatched_disables()

    def _say_unmatched_disables(self) -> None:
        """``-p no:NAME`` or ``AGENT_ENV_PLUGINS`` naming no plugin: say so (a typo would
        otherwise leave the plugin on, or every plugin off, silently)."""
        known = {name for record in self.records for name in record.names()}
        plugins = ", ".join(sorted({r.name for r in self.records if not r.builtin}))
        for name in sorted(self._disabled - known):
            sys.stderr.write(f"warning: -p no:{name} matches no plugin, so nothing was turned "
                             f"off (plugins: {plugins or 'none'})\n")
        for name in sorted((self._only or set()) - known):
            sys.stderr.write(f"warning: AGENT_ENV_PLUGINS names {name}, which matches no "
                             f"plugin, so it loads nothing (plugins: {plugins or 'none'})\n")

    def _register(self, record: PluginRecord, module: ModuleType) -> None:
        try:
            self.pm.register(module, name=record.name)
        except Exception as exc:
            record.fail("bad-hook", f"{type(exc).__name__}: {exc}")
            return
        record.plugin = module
        record.status = ACTIVE
        for caller in self.pm.get_hookcallers(module) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is module and not (impl.wrapper or impl.hookwrapper):
                    # pluggy calls impl.function with the arguments it named at registration;
                    # the attribute is typed Final, hence setattr
                    guarded = self._guard(record, caller.name, impl.function)
                    setattr(impl, "function", guarded)  # noqa: B010

    def _guard(self, record: PluginRecord, hook: str, function: Callable[..., Any]) -> Any:
        """``function`` with the kernel's rules around it (see the module docstring)."""

        def guarded(*args: Any) -> Any:
            self._calling.append(record.name)
            try:
                with stdout_to_stderr():
                    result = function(*args)
            except Exception as exc:
                if record.builtin or (hook == "agent_env_configure" and isinstance(exc, UserError)):
                    raise  # a kernel defect, or a setting the user must fix: one clear error
                record.fail("hook-error", f"{hook}: {type(exc).__name__}: {exc}")
                from agent_env.logs import get_logger

                get_logger("plugins").warning(
                    "plugin hook failed", plugin=record.name, hook=hook, exc_info=True
                )
                return None
            finally:
                self._calling.pop()
            if result is not None:
                self._returned_by[id(result)] = record.name
            return result

        return guarded

    def record(self, name: str) -> PluginRecord | None:
        self.load()
        for record in self.records:
            if record.name == name:
                return record
        return None

    @property
    def configured(self) -> bool:
        return self._configured

    def _builtin_names(self) -> set[str]:
        return {r.name for r in self.records if r.builtin}

    # -- configuration ---------------------------------------------------------------------

    def configure(self, tables: dict[str, dict[str, Any]] | None = None) -> None:
        """Hand each plugin its ``[plugins.<distribution>]`` table (once per host).

        Each implementation is called through a pluggy subset caller holding only its own
        plugin, because each receives a different table. Tables naming no installed plugin
        are kept in :attr:`unknown_tables` for ``plugin check`` and warned about here.
        """
        with self._lock:
            self.load()
            if self._configured:
                return
            self._configured = True
            if tables is None:
                tables = self._settings() if self._settings is not None else {}
            by_name = {normalise(k): v for k, v in tables.items()}
            caller = self.pm.hook.agent_env_configure
            try:
                for impl in reversed(caller.get_hookimpls()):  # pluggy's call order
                    if impl.wrapper or impl.hookwrapper:
                        continue
                    record = self.record(impl.plugin_name)
                    names = record.names() if record else {normalise(impl.plugin_name)}
                    settings: dict[str, Any] = {}
                    for name in names:
                        settings.update(by_name.get(name, {}))
                    others = [p for p in self.pm.get_plugins() if p is not impl.plugin]
                    own = self.pm.subset_hook_caller("agent_env_configure", remove_plugins=others)
                    own(settings=settings)
            except BaseException:
                self._configured = False  # a refused table refuses every use, not only the first
                raise
            from agent_env.plugins.reporting import unknown_plugin_tables

            self.unknown_tables = unknown_plugin_tables(self, tables)
            for message in self.unknown_tables:
                sys.stderr.write(f"warning: {message}\n")

    # -- registries ------------------------------------------------------------------------

    def contributions(self, kind: str) -> list[Contribution]:
        """Every contribution of ``kind`` with its status (conflicts included)."""
        with self._lock:
            if kind in self._contributions:
                return self._contributions[kind]
            self.configure()
            hook_name, key = CONTRIBUTION_HOOKS[kind]
            self._returned_by.clear()
            results = getattr(self.pm.hook, hook_name)()
            found: list[Contribution] = []
            for result in results:
                plugin = self._returned_by.get(id(result), "?")
                record = self.record(plugin)
                for obj in result or ():
                    try:
                        name = key(obj)
                    except AttributeError:
                        if record is None or record.builtin:
                            raise
                        record.fail(
                            "bad-contribution", f"{hook_name} returned {obj!r} without a name"
                        )
                        continue
                    found.append(Contribution(kind, name, plugin, obj=obj))
            self._returned_by.clear()
            self._contributions[kind] = resolve_conflicts(found, self._builtin_names())
            return self._contributions[kind]

    def registry(self, kind: str) -> Registry:
        """Name -> contributed object, for the contributions of ``kind`` that are in effect.

        A :class:`~agent_env.contributions.Lazy` contribution is imported when first read.
        """
        if kind not in self._registries:
            entries = {c.name: c.obj for c in self.contributions(kind) if c.status == ACTIVE}
            self._registries[kind] = Registry(entries, lambda name, lazy: self.load_lazy(
                kind, name, lazy))
        return self._registries[kind]

    def lookup(self, kind: str, name: str) -> Any:
        """The contribution ``name`` of ``kind``, or a MissingPluginError saying why not."""
        found = self.registry(kind).get(name)
        if found is None:
            from agent_env.plugins.reporting import missing

            raise missing(self, kind, name)
        return found

    def load_lazy(self, kind: str, name: str, lazy: Lazy) -> Any:
        """Import a lazy contribution; a broken outside one is marked failed and explained."""
        contribution = next(
            (c for c in self.contributions(kind) if c.name == name and c.status == ACTIVE), None
        )
        record = self.record(contribution.plugin) if contribution else None
        try:
            with stdout_to_stderr():
                loaded = lazy.load()
            key = CONTRIBUTION_HOOKS[kind][1] if kind != "store" else None
            if key is not None and key(loaded) != name:
                raise TypeError(f"{lazy.target} is named {key(loaded)!r}, not {name!r}")
        except Exception as exc:
            if record is None or record.builtin:
                raise
            detail = f"{lazy.target}: {type(exc).__name__}: {exc}"
            assert contribution is not None
            contribution.status, contribution.reason = FAILED, "import-error"
            contribution.detail = detail
            record.fail("import-error", detail)
            raise MissingPluginError(
                f"'{name}' comes from plugin {record.distribution}, which is broken ({detail}); "
                f"see `agent-env plugin show {record.distribution}`"
            ) from None
        return loaded

    def load_everything(self) -> None:
        """Import every lazy contribution, so ``plugin check`` sees the broken ones."""
        for kind in CONTRIBUTION_HOOKS:
            registry = self.registry(kind)
            for name in list(registry):
                try:
                    value = registry[name]
                    if isinstance(value, StoreBackend) and isinstance(value.factory, Lazy):
                        self.load_lazy(kind, name, value.factory)
                except MissingPluginError:
                    continue

    def all_contributions(self) -> list[Contribution]:
        out: list[Contribution] = []
        for kind in CONTRIBUTION_HOOKS:
            out.extend(self.contributions(kind))
        out.extend(self._cli_contributions)
        return out

    # -- the command line ------------------------------------------------------------------

    def extend_cli(self, cli: Any) -> None:
        """Let plugins add commands, by the same conflict rules as every other contribution."""
        with self._lock:
            self.configure()
            found: list[Contribution] = []

            def claim(name: str, command: Any) -> None:
                plugin = self._calling[-1] if self._calling else "?"
                found.append(Contribution(CLI_COMMAND, name, plugin, obj=command))

            self.pm.hook.agent_env_cli(cli=ClaimingGroup(claim))
            self._cli_contributions = resolve_conflicts(found, self._builtin_names())
            for contribution in self._cli_contributions:
                if contribution.status == ACTIVE:
                    cli.add_command(contribution.obj, contribution.name)

    # -- events ----------------------------------------------------------------------------

    def emit(self, event: Any) -> None:
        """Deliver a run event to every observer; an observer's error is logged, never raised."""
        self.configure()
        self.pm.hook.agent_env_run_event(event=event)

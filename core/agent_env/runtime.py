"""The runtime: one configuration of AgentEnv and everything built from it.

A :class:`Runtime` holds the config (with its ``configure()`` overrides), the plugin host
configured from it, the stores and sandbox providers opened under it, and a ``state`` dict in
which plugins keep what their ``agent_env_configure`` settings decided. Nothing of that lives
in module globals, so two runtimes with different configs can live in one training process:
``with use(other): ...`` (or an :class:`~agent_env.task.EpisodeSpec` carrying ``runtime=``)
makes ``other`` current for that code, its threads of asyncio tasks included.

The CLI and most programs never see this: they use the process's default runtime, which
:func:`current` creates on first use. :func:`reset` is the one reset tests need. This module is
the one way to the runtime: ``current()`` and its attributes (``config``, ``host``,
``document_store``, ``object_store``, ``versioned_store``...); the config, plugin and store
modules below it never reach up.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from agent_env.config import Config
    from agent_env.plugins import PluginHost
    from agent_env.sandbox.base import SandboxProvider
    from agent_env.stores.base import DocumentStore, ObjectStore
    from agent_env.stores.versioned import VersionedStore


@attrs.define(eq=False)
class Runtime:
    """Config, plugin host, stores and providers for one configuration (see the module doc)."""

    #: ``configure()`` sections, highest precedence, merged over file and variables.
    overrides: dict[str, Any] = attrs.field(factory=dict)
    #: Plugins turned off (``agent-env -p no:NAME``); read when the host is first built.
    disabled: set[str] = attrs.field(factory=set)
    #: What plugins decided from their settings, by plugin (``state["mcp_env"]``).
    state: dict[str, Any] = attrs.field(factory=dict)
    #: A host made by the caller (tests: only some plugins); default: built on first use.
    _host: PluginHost | None = attrs.field(default=None, alias="host")
    _config: Config | None = attrs.field(default=None, init=False)
    _stores: dict[tuple[Any, ...], Any] = attrs.field(factory=dict, init=False)
    _providers: dict[str, SandboxProvider] = attrs.field(factory=dict, init=False)
    _lock: threading.RLock = attrs.field(factory=threading.RLock, init=False)

    # -- config ----------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The merged config, loaded on first use (its warnings printed once)."""
        with self._lock:
            if self._config is None:
                from agent_env.config import load_config

                config = load_config(overrides=self.overrides)
                self._config = attrs.evolve(config, secrets=lambda: self.store("secret"))
                for warning in self._config.warnings:
                    sys.stderr.write(f"warning: {warning}\n")
            return self._config

    def configure(self, **sections: Any) -> None:
        """Override config sections from code; what was built from the old config is dropped."""
        from agent_env.config import merge_value

        with self._lock:
            for name, value in sections.items():
                self.overrides[name] = merge_value(self.overrides.get(name), value)
            self._config = None
            self._close_built()
            if "plugins" in sections:
                self._host = None
                self.state.clear()

    # -- plugins ---------------------------------------------------------------------------

    @property
    def host(self) -> PluginHost:
        """The plugin host, loaded and configured (``[plugins.*]`` tables) on first use."""
        with self._lock:
            if self._host is None:
                from agent_env.plugins import PluginHost

                host = PluginHost(
                    disabled=set(self.disabled), settings=lambda: self.config.plugin_tables()
                )
                host.load()
                self._host = host
            if not self._host.configured:
                with use(self):  # plugins keep what their settings decide in *this* state
                    self._host.configure()
            return self._host

    def disable(self, names: list[str]) -> None:
        """Turn plugins off (``-p no:NAME``); only before the host is first used."""
        with self._lock:
            self.disabled.update(names)
            self._host = None

    # -- stores and providers --------------------------------------------------------------

    def store(self, kind: str, config: Config | None = None) -> Any:
        """The ``kind`` store ``config`` (default: this runtime's) selects, built once."""
        from agent_env.stores import STORE_INTERFACES, build_store

        if kind not in STORE_INTERFACES:
            raise ValueError(f"unknown store kind {kind!r} (kinds: {', '.join(STORE_INTERFACES)})")
        config = config or self.config
        choice = config.store(kind)
        key = (
            kind,
            choice.backend,
            json.dumps(choice.settings, sort_keys=True, default=str),
            str(config.state_root),
        )
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = build_store(
                    kind, choice.backend, choice.settings, config=config, runtime=self,
                    impl=choice.impl,
                )
                self._stores[key] = store
            return store

    @property
    def document_store(self) -> DocumentStore:
        """The configured document store (instance records, versioned entities, groups)."""
        store: DocumentStore = self.store("document")
        return store

    @property
    def object_store(self) -> ObjectStore:
        """The configured object store (artifact files, trajectories, snapshots)."""
        store: ObjectStore = self.store("object")
        return store

    @property
    def versioned_store(self) -> VersionedStore:
        """Versioned entities (tasks, evals, artifacts, envs, agents) on the document store."""
        from agent_env.stores.versioned import VersionedStore

        return VersionedStore(self.document_store)

    def provider(self, name: str) -> SandboxProvider:
        """Sandbox provider ``name``, built once from ``[sandbox.providers.<name>.config]``."""
        with self._lock:
            provider = self._providers.get(name)
            if provider is None:
                from agent_env.sandbox.base import SandboxProvider
                from agent_env.settings import build

                provider_class: Any = self.host.lookup("sandbox_provider", name)
                owner = next((k for k in provider_class.__mro__ if "from_config" in vars(k)),
                             None)
                # the default from_config passes the table on: the constructor's keys are the
                # settings, so check against the constructor
                factory = provider_class if owner is SandboxProvider else provider_class.from_config
                provider = build(
                    factory,
                    self.config.provider_settings(name),
                    where=f"[sandbox.providers.{name}.config]",
                    what=f"the '{name}' sandbox provider",
                )
                self._providers[name] = provider
            return provider

    def close(self) -> None:
        """Close the stores this runtime opened and forget its providers."""
        with self._lock:
            self._close_built()

    def _close_built(self) -> None:
        for store in self._stores.values():
            close = getattr(store, "close", None)
            if close is not None:
                close()
        self._stores.clear()
        self._providers.clear()


_DEFAULT: Runtime | None = None
_DEFAULT_LOCK = threading.Lock()
_CURRENT: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar(
    "agent_env_runtime", default=None
)


def current() -> Runtime:
    """The runtime in effect here: one made current with :func:`use`, else the default."""
    global _DEFAULT
    runtime = _CURRENT.get()
    if runtime is not None:
        return runtime
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Runtime()
        return _DEFAULT


@contextlib.contextmanager
def use(runtime: Runtime) -> Iterator[Runtime]:
    """Make ``runtime`` current for the code inside (and the asyncio tasks it starts)."""
    token = _CURRENT.set(runtime)
    try:
        yield runtime
    finally:
        _CURRENT.reset(token)


def reset() -> None:
    """Close and forget the default runtime: config, overrides, plugins, stores, providers."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        old, _DEFAULT = _DEFAULT, None
    if old is not None:
        old.close()


# -- from code ----------------------------------------------------------------------------------


def configure(**sections: Any) -> None:
    """Override config from code, highest precedence: ``configure(stores={"object": "s3"})``
    (``agent_env.configure``). Applies to the current runtime; stores and providers opened
    under the old config are closed."""
    current().configure(**sections)

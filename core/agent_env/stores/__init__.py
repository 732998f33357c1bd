"""Stores: the interfaces, and :func:`open_store`, which builds the backend config names.

Config picks a backend per kind by its registered name (``[stores] object = "s3"``, settings in
``[stores.object]``); plugins register backends with the ``agent_env_stores`` hook. This module
turns that choice into a store object, once per process, so every part of the framework shares
one connection pool per store:

* ``secret:`` references left in a backend's settings are resolved with the configured secret
  store (whose own settings therefore cannot use them);
* a factory that accepts a ``state_root`` keyword gets the config's state folder (the local
  backends keep their files there unless a ``path`` setting says otherwise);
* a name no installed plugin provides fails with a :class:`MissingPluginError` saying which
  plugin and extra provide it, or listing the names that are installed.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from agent_env.stores.base import (
    STORE_INTERFACES,
    DocumentStore,
    DuplicateKeyError,
    ImageStore,
    InvalidObjectKey,
    InvalidQuery,
    InvalidUpdate,
    ObjectExists,
    ObjectMeta,
    ObjectNotFound,
    ObjectStore,
    RegistryAuth,
    SecretStore,
    StoreError,
    UnsupportedOperation,
    validate_key,
)

if TYPE_CHECKING:
    from agent_env.config import Config
    from agent_env.plugins import PluginHost
    from agent_env.stores.versioned import VersionedStore

__all__ = [
    "STORE_INTERFACES",
    "DocumentStore",
    "DuplicateKeyError",
    "ImageStore",
    "InvalidObjectKey",
    "InvalidQuery",
    "InvalidUpdate",
    "ObjectExists",
    "ObjectMeta",
    "ObjectNotFound",
    "ObjectStore",
    "RegistryAuth",
    "SecretStore",
    "StoreError",
    "UnsupportedOperation",
    "build_store",
    "document_store",
    "image_store",
    "object_store",
    "open_store",
    "reset_stores",
    "secret_store",
    "validate_key",
    "versioned_store",
]

_CACHE: dict[tuple[Any, ...], Any] = {}
_LOCK = threading.RLock()


def open_store(kind: str, config: Config | None = None, *, host: PluginHost | None = None) -> Any:
    """The store config selects for ``kind``, built on first use and shared by the process.

    ``host`` is the plugin host to look backends up in (default: the process's host).
    """
    if kind not in STORE_INTERFACES:
        raise ValueError(f"unknown store kind {kind!r} (kinds: {', '.join(STORE_INTERFACES)})")
    if config is None:
        from agent_env.config import get_config

        config = get_config()
    choice = config.store(kind)
    key = (
        kind,
        choice.backend,
        json.dumps(choice.settings, sort_keys=True, default=str),
        str(config.state_root),
        id(host),
    )
    with _LOCK:
        store = _CACHE.get(key)
        if store is None:
            store = build_store(kind, choice.backend, choice.settings, config=config, host=host)
            _CACHE[key] = store
        return store


def build_store(
    kind: str,
    backend: str,
    settings: dict[str, Any] | None = None,
    *,
    config: Config | None = None,
    host: PluginHost | None = None,
) -> Any:
    """Build a fresh (uncached) ``backend`` store of ``kind`` from its settings table."""
    from agent_env.config import resolve_secrets
    from agent_env.errors import ConfigError

    factory = _factory(kind, backend, host)
    settings = dict(settings or {})
    if _has_secret_reference(settings):
        if kind == "secret":
            raise ConfigError(
                "[stores.secret] cannot use secret: references (the secret store resolves them); "
                "use env:NAME instead"
            )
        secrets: SecretStore = open_store("secret", config, host=host)
        settings = resolve_secrets(settings, secrets.get, where=f"stores.{kind}")
    parameters = _parameters(factory)
    if parameters is not None:
        unknown = sorted(set(settings) - parameters - {"state_root"})
        if unknown:
            known = ", ".join(sorted(parameters - {"state_root"})) or "none"
            raise ConfigError(
                f"[stores.{kind}] has unknown setting(s) {', '.join(unknown)} for the "
                f"'{backend}' {kind} store (known: {known})"
            )
        if "state_root" in parameters and "state_root" not in settings:
            if config is None:
                from agent_env.config import get_config

                config = get_config()
            settings["state_root"] = config.state_root
    return factory(**settings)


def _factory(kind: str, backend: str, host: PluginHost | None) -> Any:
    from agent_env.errors import MissingPluginError
    from agent_env.plugins import get_host
    from agent_env.plugins.catalog import provider_of

    host = host or get_host()
    registry = host.registry("store")
    found = registry.get(f"{kind}:{backend}")
    if found is not None:
        return found.factory
    provider = provider_of(f"{kind}_store", backend)
    if provider is not None:
        notes = [
            f"the {provider.distribution} distribution is installed but the plugin is "
            f"{record.status} ({record.reason}: {record.detail}); see `agent-env plugin list`"
            for record in host.records
            if record.distribution == provider.distribution and record.status != "active"
        ]
        raise MissingPluginError(
            f"the '{backend}' {kind} store comes from the {provider.short_name} plugin: "
            f"{provider.install_hint()}",
            notes=notes,
        )
    installed = sorted(name.split(":", 1)[1] for name in registry if name.startswith(f"{kind}:"))
    raise MissingPluginError(
        f"no {kind} store named '{backend}' (installed: {', '.join(installed) or 'none'})"
    )


def _parameters(factory: Any) -> set[str] | None:
    """Keyword names ``factory`` accepts, or ``None`` when it takes ``**kwargs`` (or is opaque)."""
    import inspect  # not at import time: it costs several ms of CLI start-up

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return None
    return {
        name
        for name, p in signature.parameters.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }


def _has_secret_reference(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_secret_reference(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_secret_reference(v) for v in value)
    return isinstance(value, str) and value.startswith("secret:")


def reset_stores() -> None:
    """Close and forget every cached store (tests; after ``configure()`` changed stores)."""
    with _LOCK:
        for store in _CACHE.values():
            close = getattr(store, "close", None)
            if close is not None:
                close()
        _CACHE.clear()


def document_store(config: Config | None = None) -> DocumentStore:
    return open_store("document", config)


def object_store(config: Config | None = None) -> ObjectStore:
    return open_store("object", config)


def image_store(config: Config | None = None) -> ImageStore:
    return open_store("image", config)


def secret_store(config: Config | None = None) -> SecretStore:
    return open_store("secret", config)


def versioned_store(config: Config | None = None) -> VersionedStore:
    """Versioned entities on the configured document store."""
    from agent_env.stores.versioned import VersionedStore

    return VersionedStore(document_store(config))

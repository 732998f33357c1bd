"""Stores: the interfaces, and :func:`open_store`, which builds the backend config names.

Config picks a backend per kind by its registered name (``[stores] object = "s3"``, settings in
``[stores.object]``); plugins register backends with the ``agent_env_stores`` hook. This module
turns that choice into a store object, once per runtime, so every part of the framework shares
one connection pool per store:

* ``secret:`` references left in a backend's settings are resolved with the configured secret
  store (whose own settings therefore cannot use them);
* a factory that accepts a ``state_root`` keyword gets the config's state folder (the local
  backends keep their files there unless a ``path`` setting says otherwise);
* a name no installed plugin provides fails with a :class:`MissingPluginError` saying which
  plugin and extra provide it, or listing the names that are installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_env.contributions import Lazy
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
    from agent_env.runtime import Runtime
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
    "secret_store",
    "validate_key",
    "versioned_store",
]

def open_store(kind: str, config: Config | None = None) -> Any:
    """The store config selects for ``kind``, built on first use and shared by the runtime.

    ``config`` defaults to the current runtime's (:mod:`agent_env.runtime`), which also owns
    the cache, so every part of a run shares one connection pool per store.
    """
    from agent_env.runtime import current

    return current().store(kind, config)


def build_store(
    kind: str,
    backend: str,
    settings: dict[str, Any] | None = None,
    *,
    config: Config | None = None,
    runtime: Runtime | None = None,
) -> Any:
    """Build a fresh (uncached) ``backend`` store of ``kind`` from its settings table.

    ``runtime`` (default: the current one) gives the plugin host to look the backend up in
    and the secret store that resolves ``secret:`` references in ``settings``.
    """
    from agent_env.config import has_secret_reference, resolve_secrets
    from agent_env.errors import ConfigError
    from agent_env.settings import build

    if runtime is None:
        from agent_env.runtime import current

        runtime = current()
    found = runtime.host.lookup("store", f"{kind}:{backend}")
    factory = found.factory
    if isinstance(factory, Lazy):
        factory = runtime.host.load_lazy("store", f"{kind}:{backend}", factory)
    settings = dict(settings or {})
    if has_secret_reference(settings):
        if kind == "secret":
            raise ConfigError(
                "[stores.secret] cannot use secret: references (the secret store resolves them); "
                "use env:NAME instead"
            )
        secrets: SecretStore = runtime.store("secret", config)
        settings = resolve_secrets(settings, secrets.get, where=f"stores.{kind}")
    injected: dict[str, Any] = {}
    if "state_root" not in settings:
        injected["state_root"] = (config or runtime.config).state_root
    return build(
        factory,
        settings,
        where=f"[stores.{kind}]",
        what=f"the '{backend}' {kind} store",
        injected=injected,
    )


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

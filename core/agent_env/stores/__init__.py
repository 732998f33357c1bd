"""Stores: the interfaces, and :func:`build_store`, which builds the backend config names.

Config picks a backend per kind by its registered name (``[stores] object = "s3"``, settings in
``[stores.object]``); plugins register backends with the ``agent_env_stores`` hook. This module
turns that choice into a store object; the runtime (``current().store(kind)``) builds each once,
so every part of the framework shares one connection pool per store:

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
    "validate_key",
]


def build_store(
    kind: str,
    backend: str,
    settings: dict[str, Any] | None = None,
    *,
    config: Config | None = None,
    runtime: Runtime,
    impl: str | None = None,
) -> Any:
    """Build a fresh (uncached) ``backend`` store of ``kind`` from its settings table, or the
    class ``impl`` names (``module:Class``) when the config names one.

    ``runtime`` gives the plugin host to look the backend up in and the secret store that
    resolves ``secret:`` references in ``settings``.
    """
    from agent_env.config import has_secret_reference, resolve_secrets
    from agent_env.errors import ConfigError
    from agent_env.settings import build

    if impl is not None:
        factory = _impl_class(kind, impl)
    else:
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
        what=impl or f"the '{backend}' {kind} store",
        injected=injected,
    )


def _impl_class(kind: str, impl: str) -> Any:
    """The class ``[stores.<kind>] impl`` names; ConfigError naming it and the section when it
    does not import or is not a store of ``kind``."""
    from agent_env.contributions import import_target
    from agent_env.errors import ConfigError

    where = f"[stores.{kind}] impl = \"{impl}\""
    try:
        found = import_target(impl)
    except Exception as exc:
        raise ConfigError(f"{where} cannot be imported ({exc})") from None
    interface = STORE_INTERFACES[kind]
    if not (isinstance(found, type) and issubclass(found, interface)):
        raise ConfigError(f"{where} is not a {interface.__name__} (subclass "
                          f"{interface.__module__}.{interface.__name__})")
    return found

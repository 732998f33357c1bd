"""Finding sandbox providers by name, and picking the first usable one of a fallback chain."""

from __future__ import annotations

from typing import Any

from agent_env.errors import MissingPluginError, UserError
from agent_env.sandbox.base import SandboxProvider

_PROVIDERS: dict[str, SandboxProvider] = {}


def provider_names() -> set[str]:
    from agent_env.plugins import get_host

    return set(get_host().registry("sandbox_provider"))


def missing_provider_message(name: str) -> str:
    """Why ``name`` is not available, naming the plugin and extra that provide it."""
    from agent_env.plugins.catalog import provider_of

    plugin = provider_of("sandbox_provider", name)
    known = ", ".join(sorted(provider_names())) or "none"
    if plugin is not None:
        return (f"the '{name}' sandbox provider comes from the {plugin.short_name} plugin, "
                f"which is not installed ({plugin.install_hint()})")
    return f"'{name}' is not a known sandbox provider (installed: {known})"


def open_provider(name: str) -> SandboxProvider:
    """The process's provider ``name``, built once from its config table."""
    if name in _PROVIDERS:
        return _PROVIDERS[name]
    from agent_env.config import get_config
    from agent_env.plugins import get_host

    provider_class: Any = get_host().registry("sandbox_provider").get(name)
    if provider_class is None:
        raise MissingPluginError(missing_provider_message(name))
    provider = provider_class.from_config(**get_config().provider_settings(name))
    _PROVIDERS[name] = provider
    return provider


def choose_provider(chain: list[str]) -> str:
    """The first provider of ``chain`` that is installed and usable on this host."""
    reasons = []
    registry = None
    for name in chain:
        if registry is None:
            from agent_env.plugins import get_host

            registry = get_host().registry("sandbox_provider")
        provider_class = registry.get(name)
        if provider_class is None:
            reasons.append(missing_provider_message(name))
            continue
        reason = provider_class.availability()
        if reason is None:
            return name
        reasons.append(f"{name}: {reason}")
    raise UserError(
        f"no sandbox provider of {','.join(chain)} is usable here", notes=reasons
    )


def forget_providers() -> None:
    """Drop built providers (tests that change the state root)."""
    _PROVIDERS.clear()

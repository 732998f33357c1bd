"""Finding sandbox providers by name, and picking the first usable one of a fallback chain."""

from __future__ import annotations

from typing import Any

from agent_env.errors import UserError
from agent_env.sandbox.base import SandboxProvider


def open_provider(name: str) -> SandboxProvider:
    """The current runtime's provider ``name``, built once from its config table."""
    from agent_env.runtime import current

    return current().provider(name)


def choose_provider(chain: list[str]) -> str:
    """The first provider of ``chain`` that is installed and usable on this host."""
    from agent_env.plugins.reporting import missing
    from agent_env.runtime import current

    host = current().host
    reasons = []
    for name in chain:
        provider_class: Any = host.registry("sandbox_provider").get(name)
        if provider_class is None:
            reasons.append(missing(host, "sandbox_provider", name).message)
            continue
        reason = provider_class.availability()
        if reason is None:
            return name
        reasons.append(f"{name}: {reason}")
    raise UserError(
        f"no sandbox provider of {','.join(chain)} is usable here", notes=reasons
    )

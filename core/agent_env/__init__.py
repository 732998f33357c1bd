"""AgentEnv: build, deploy and run agent environments and the tasks that grade agents in them.

The package import stays cheap on purpose (the CLI's startup time depends on it): the public
names below load their modules on first use.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "hookimpl": "agent_env.hookspecs",
    "hookspec": "agent_env.hookspecs",
    "StoreBackend": "agent_env.contributions",
    "BundleSource": "agent_env.contributions",
    "RunEvent": "agent_env.events",
    "UserError": "agent_env.errors",
    "configure": "agent_env.runtime",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_env' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)

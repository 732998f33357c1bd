"""The builtin plugin that contributes the ``local`` runner (imported when used)."""

from __future__ import annotations

from agent_env.contributions import Lazy
from agent_env.hookspecs import hookimpl


@hookimpl
def agent_env_runners() -> list[Lazy]:
    return [Lazy("local", "agent_env.runners.local:LocalRunner")]

"""The Harbor plugin's hooks: one bundle format, imported only when a conversion runs."""

from __future__ import annotations

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_bundle_formats() -> list[Lazy]:
    return [Lazy("harbor", "agentenv_harbor.convert:HarborFormat")]

"""The Harbor plugin's hooks: one bundle format, imported only when a conversion runs, and its
settings table (``image_map``)."""

from __future__ import annotations

from typing import Any

from agent_env.api import Lazy, hookimpl


@hookimpl
def agent_env_bundle_formats() -> list[Lazy]:
    return [Lazy("harbor", "agentenv_harbor.convert:HarborFormat")]


@hookimpl
def agent_env_configure(settings: dict[str, Any]) -> None:
    """``[plugins.agentenv-framework-harbor] image_map`` (see :mod:`.settings`)."""
    from agentenv_harbor.settings import configure

    configure(settings)

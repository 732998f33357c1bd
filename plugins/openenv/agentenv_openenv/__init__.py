"""A bundle's tasks as an OpenEnv environment (https://github.com/meta-pytorch/OpenEnv).

``build_app(bundle)`` returns the FastAPI app any OpenEnv client resets and steps;
``agent-env openenv serve BUNDLE`` serves it. ``openenv`` (and FastAPI, gradio) load only when
``build_app`` is first used: the CLI imports this package at every start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentenv_openenv.app import build_app

__all__ = ["build_app"]


def __getattr__(name: str) -> Any:
    if name == "build_app":
        from agentenv_openenv.app import build_app

        return build_app
    raise AttributeError(f"module 'agentenv_openenv' has no attribute {name!r}")

"""The builtin plugin that ships the ``hello`` bundle through ``agent_env_bundles``."""

from __future__ import annotations

from pathlib import Path

from agent_env.contributions import BundleSource
from agent_env.hookspecs import hookimpl

HERE = Path(__file__).parent


@hookimpl
def agent_env_bundles() -> list[BundleSource]:
    return [BundleSource("hello", HERE / "hello")]

"""The openenv plugin's hooks: the ``agent-env openenv`` command group, loaded on first use."""

from __future__ import annotations

from typing import Any

from agent_env.api import LazyCommand, hookimpl


@hookimpl
def agent_env_cli(cli: Any) -> None:
    cli.add_command(LazyCommand("openenv", "agentenv_openenv.cli:openenv"), "openenv")

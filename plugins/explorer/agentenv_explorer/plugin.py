"""The explorer plugin's one hook: the ``up`` command.

Cheap to import on purpose (the CLI imports every plugin at start): the command module only
imports click, and the server (aiohttp) is imported when ``up`` runs.
"""

from __future__ import annotations

from typing import Any

from agent_env.api import hookimpl


@hookimpl
def agent_env_cli(cli: Any) -> None:
    from agentenv_explorer.cli import up

    cli.add_command(up, "up")

"""The explorer plugin's hooks: the ``up`` command, and run events sent to running explorers.

Cheap to import on purpose (the CLI imports every plugin at start): the command module only
imports click, the server (aiohttp) is imported when ``up`` runs, and the event sender
(:mod:`agentenv_explorer.live`) at a run's first event.
"""

from __future__ import annotations

from typing import Any

from agent_env.api import LazyCommand, hookimpl


@hookimpl
def agent_env_cli(cli: Any) -> None:
    cli.add_command(LazyCommand("up", "agentenv_explorer.cli:up"), "up")


@hookimpl
def agent_env_run_event(event: Any) -> None:
    from agentenv_explorer.live import publish

    publish(event)

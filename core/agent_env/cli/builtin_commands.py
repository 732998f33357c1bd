"""The core's own commands, added through the same ``agent_env_cli`` hook plugins use."""

from __future__ import annotations

import click

from agent_env.hookspecs import hookimpl

#: command name -> "module:attribute", each imported only when it runs (see
#: :mod:`agent_env.cli.lazy`).
CORE_COMMANDS = {
    "plugin": "agent_env.cli.plugin_cmd:plugin",
    "config": "agent_env.cli.config_cmd:config",
    "run": "agent_env.cli.run_cmd:run",
    "task": "agent_env.cli.task_cmd:task",
    "gc": "agent_env.cli.gc_cmd:gc",
    "eval": "agent_env.cli.eval_cmd:eval_group",
    "env": "agent_env.cli.env_cmd:env",
    "artifact": "agent_env.cli.artifact_cmd:artifact",
    "bundle": "agent_env.cli.bundle_cmd:bundle",
}


@hookimpl
def agent_env_cli(cli: click.Group) -> None:
    from agent_env.cli.lazy import LazyCommand

    for name, target in CORE_COMMANDS.items():
        cli.add_command(LazyCommand(name, target), name)

"""Commands imported only when they run: what keeps ``agent-env run`` from importing every
other command's module (and every plugin's) at start.

A :class:`LazyCommand` stands in the root group under its name; the root group
(:class:`~agent_env.cli.main.AgentEnvGroup`) swaps in the real command the first time it is
looked up, so ``agent-env run`` imports ``run``'s module alone, and ``agent-env --help``
(which lists them all) imports each.
"""

from __future__ import annotations

import importlib

import click


class LazyCommand(click.Command):
    """The command ``target`` (``"module:attribute"``) names, imported on first use."""

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name)
        self.target = target

    def load(self) -> click.Command:
        module_name, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command

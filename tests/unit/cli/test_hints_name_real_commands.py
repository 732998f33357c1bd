"""Issue 31, class 18: every ``agent-env A B ...`` hint in the code names a real command.
``agent-env artifact list`` was suggested, which does not exist: this walks the command tree
for every hint, so a renamed or missing command cannot be suggested again."""

from __future__ import annotations

import re
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[3]
HINT = re.compile(r"agent-env ((?:[a-z][a-z0-9-]*)(?: [a-z][a-z0-9-]*)*)")


def test_every_hint_names_a_command_that_exists() -> None:
    from agent_env.cli.main import cli

    context = click.Context(cli)
    wrong = []
    sources = [p for folder in ("core", "plugins", "protocol")
               for p in (ROOT / folder).rglob("*.py")]
    checked = 0
    for path in sources:
        for found in HINT.finditer(path.read_text(encoding="utf-8")):
            words = found.group(1).split()
            if cli.get_command(context, words[0]) is None:
                continue  # prose ("agent-env itself"), not a command line
            checked += 1
            command: click.Command = cli
            for word in words:
                if not isinstance(command, click.Group):
                    break  # the rest are the command's arguments
                sub = command.get_command(context, word)
                if sub is None:
                    wrong.append(f"{path.relative_to(ROOT)}: {found.group(0)!r} "
                                 f"({command.name} has no command {word!r})")
                    break
                command = sub
    assert checked > 50  # the walk found the hints
    assert wrong == []

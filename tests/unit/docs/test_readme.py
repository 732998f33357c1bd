"""The README's examples against the code: the plugin it shows, its config, its commands."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from agent_env.config import load_config
from agent_env.runtime import Runtime

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")
EXAMPLE = ROOT / "examples" / "plugins" / "write-file"


def block_after(label: str) -> str:
    """The fenced block that follows the line ``label``."""
    match = re.search(re.escape(label) + r"\n\n```\w*\n(.*?)```", README, re.DOTALL)
    assert match, f"README has no code block after {label!r}"
    return match[1]


@pytest.mark.parametrize(("label", "path"), [
    ("`pyproject.toml`:", EXAMPLE / "pyproject.toml"),
    ("`agentenv_write_file/__init__.py`:", EXAMPLE / "agentenv_write_file" / "__init__.py"),
])
def test_the_plugin_shown_is_the_example_that_is_tested(label: str, path: Path) -> None:
    assert block_after(label) == path.read_text(encoding="utf-8")


def test_the_config_shown_is_valid_and_its_plugin_settings_are_taken(tmp_path: Path) -> None:
    text = re.search(r"```toml\n(\[stores\].*?)```", README, re.DOTALL)
    assert text, "README has no config example"
    path = tmp_path / "config.toml"
    path.write_text(text[1])
    config = load_config(path, environ={"AWS_REGION": "eu-west-1"})
    assert config.warnings == ()
    assert config.store("object").backend == "s3"
    runtime = Runtime()
    runtime.configure(plugins=config.plugin_tables())
    runtime.host  # noqa: B018  every plugin gets its table; an unknown key would raise here
    assert runtime.host.unknown_tables == []


def test_every_command_shown_exists() -> None:
    from agent_env.cli.main import cli

    shown = set(re.findall(r"^agent-env ((?:\w[\w-]* ?)+)", README, re.MULTILINE))
    ctx = click.Context(cli)
    for line in shown:
        group: click.Command = cli
        for word in line.split():
            if not isinstance(group, click.Group):
                break
            found = group.get_command(ctx, word)
            if found is None:
                if word.isupper() or word in ("hello", "tensorlake", "stores"):
                    break  # an argument, not a command
                pytest.fail(f"README shows 'agent-env {line}', but '{word}' is no command")
            group = found

"""The plugin manager: discovery, failures, conflicts, built-in names, incompatible cores."""

from __future__ import annotations

import sys

import pytest

from agent_env.plugins import ACTIVE, CONFLICT, FAILED, SKIPPED, UNLOADED, PluginHost

STEP_PLUGIN = """
from agent_env.hookspecs import hookimpl

class Greet:
    type = "{name}"

@hookimpl
def agent_env_step_types():
    return [Greet]
"""


def host_for(*names: str, builtin: tuple[str, ...] = ()) -> PluginHost:
    host = PluginHost(builtin=builtin, only=set(names))
    host.load()
    return host


def test_a_discovered_plugin_contributes_its_step_type(toy_site) -> None:
    toy_site("toy-greet", STEP_PLUGIN.format(name="greet"))
    host = host_for("toy-greet")
    record = host.record("toy_greet")
    assert record is not None and record.status == ACTIVE
    assert record.distribution == "toy-greet" and record.version == "1.0"
    assert host.registry("step_type")["greet"].type == "greet"


def test_a_plugin_that_raises_on_import_is_recorded_and_skipped(toy_site) -> None:
    toy_site("toy-broken", "raise RuntimeError('boom at import')")
    toy_site("toy-greet", STEP_PLUGIN.format(name="greet"))
    host = host_for("toy-broken", "toy-greet")
    broken = host.record("toy_broken")
    assert broken.status == FAILED and broken.reason == "import-error"
    assert "RuntimeError: boom at import" in broken.detail
    assert "greet" in host.registry("step_type")  # the healthy plugin is unaffected


def test_a_plugin_calling_sys_exit_on_import_does_not_exit(toy_site) -> None:
    toy_site("toy-exit", "import sys; sys.exit(3)")
    host = host_for("toy-exit")
    assert host.record("toy_exit").status == FAILED


def test_a_name_claimed_by_two_plugins_is_left_out_for_both(toy_site) -> None:
    toy_site("toy-one", STEP_PLUGIN.format(name="greet"))
    toy_site("toy-two", STEP_PLUGIN.format(name="greet"))
    host = host_for("toy-one", "toy-two")
    claims = [c for c in host.contributions("step_type") if c.name == "greet"]
    assert {c.status for c in claims} == {CONFLICT}
    assert {c.reason for c in claims} == {"name-conflict"}
    assert "greet" not in host.registry("step_type")
    assert any("toy_two" in c.detail for c in claims if c.plugin == "toy_one")


def test_a_plugin_may_not_take_a_built_in_name(toy_site) -> None:
    builtin = toy_site("toy-core", STEP_PLUGIN.format(name="greet"))
    toy_site("toy-shadow", STEP_PLUGIN.format(name="greet"))
    host = host_for("toy-shadow", builtin=(builtin,))
    shadow = next(c for c in host.contributions("step_type") if c.plugin == "toy_shadow")
    assert shadow.status == SKIPPED and shadow.reason == "shadows-builtin"
    assert host.registry("step_type")["greet"].__module__ == builtin


def test_an_incompatible_core_requirement_is_refused_without_importing(toy_site) -> None:
    toy_site(
        "toy-future",
        "raise AssertionError('must not be imported')",
        requires=["agentenv-framework>=99"],
    )
    host = host_for("toy-future")
    record = host.record("toy_future")
    assert record.status == FAILED and record.reason == "incompatible-core"
    assert "needs agentenv-framework>=99" in record.detail
    assert "toy_future" not in sys.modules


def test_a_compatible_or_extra_only_requirement_loads(toy_site) -> None:
    toy_site(
        "toy-ok",
        STEP_PLUGIN.format(name="ok"),
        requires=["agentenv-framework>=0.1", 'agentenv-framework<0.0; extra == "old"'],
    )
    assert host_for("toy-ok").record("toy_ok").status == ACTIVE


def test_what_a_plugin_prints_while_importing_goes_to_stderr(toy_site, capfd) -> None:
    toy_site("toy-noisy", "print('hello from import')\n" + STEP_PLUGIN.format(name="n"))
    host_for("toy-noisy")
    out, err = capfd.readouterr()
    assert "hello from import" not in out
    assert "hello from import" in err


def test_agent_env_plugins_leaves_others_unloaded(toy_site, monkeypatch) -> None:
    toy_site("toy-a", STEP_PLUGIN.format(name="a"))
    toy_site("toy-b", "raise AssertionError('not selected, must not import')")
    monkeypatch.setenv("AGENT_ENV_PLUGINS", "toy-a")
    host = PluginHost(builtin=())
    host.load()
    assert host.record("toy_a").status == ACTIVE
    b = host.record("toy_b")
    assert b.status == UNLOADED and b.reason == "not-selected"


def test_disabled_plugins_are_skipped(toy_site) -> None:
    toy_site("toy-a", STEP_PLUGIN.format(name="a"))
    host = PluginHost(builtin=(), only={"toy-a"}, disabled={"toy-a"})
    host.load()
    assert host.record("toy_a").status == SKIPPED


def test_a_hook_that_raises_marks_the_plugin_failed(toy_site) -> None:
    toy_site(
        "toy-hookfail",
        """
from agent_env.hookspecs import hookimpl

@hookimpl
def agent_env_step_types():
    raise ValueError("no steps today")
""",
    )
    host = host_for("toy-hookfail")
    assert host.registry("step_type") == {}
    record = host.record("toy_hookfail")
    assert record.status == FAILED and record.reason == "hook-error"


def test_plugins_receive_their_own_config_table(toy_site) -> None:
    toy_site(
        "toy-conf",
        """
from agent_env.hookspecs import hookimpl
SEEN = []

@hookimpl
def agent_env_configure(settings):
    SEEN.append(settings)
""",
    )
    host = host_for("toy-conf")
    host.configure({"toy-conf": {"colour": "blue"}, "other": {"x": 1}})
    assert sys.modules["toy_conf"].SEEN == [{"colour": "blue"}]


def test_cli_commands_from_plugins_never_replace_core_ones(toy_site) -> None:
    import click

    from agent_env.cli.lazy import LazyCommand

    toy_site(
        "toy-cli",
        """
import click
from agent_env.hookspecs import hookimpl

@click.command()
def plugin():
    "Pretends to be the core's plugin command."

@click.command()
def hello():
    "A new command."

@hookimpl
def agent_env_cli(cli):
    cli.add_command(plugin, "plugin")
    cli.add_command(hello, "hello")
""",
    )
    host = PluginHost(only={"toy-cli"})  # with the real built-ins
    host.load()
    group = click.Group("root")
    host.extend_cli(group)
    core = group.commands["plugin"]  # the core's own, imported when it runs
    assert isinstance(core, LazyCommand) and core.load().help.startswith("List, check")
    assert "hello" in group.commands
    shadow = [c for c in host._cli_contributions if c.plugin == "toy_cli" and c.name == "plugin"]
    assert shadow[0].status == SKIPPED


@pytest.mark.parametrize("kind", ["env_type", "sandbox_provider", "step_type", "store", "bundle"])
def test_every_contribution_kind_has_a_hook(kind: str) -> None:
    host = PluginHost(builtin=(), only=set())
    host.load()
    assert host.contributions(kind) == []


def test_a_lazy_command_that_does_not_import_is_one_line() -> None:
    import click

    from agent_env.cli.lazy import LazyCommand
    from agent_env.cli.main import AgentEnvGroup

    group = AgentEnvGroup("root")
    group._extended = True  # this test's commands only
    group.add_command(LazyCommand("broken", "agentenv_no_such_module:cli"), "broken")
    with click.Context(group) as ctx:
        try:
            group.get_command(ctx, "broken")
        except click.ClickException as exc:
            message = exc.format_message()
        else:
            raise AssertionError("a command that does not import was offered")
    assert message.startswith("the command 'broken' (agentenv_no_such_module:cli) could not "
                              "be loaded: No module named 'agentenv_no_such_module'")
    assert "\n" not in message

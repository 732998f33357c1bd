"""Every hook goes through pluggy's calling: ordering, wrappers, configure, isolation, the CLI."""

from __future__ import annotations

from typing import Any

import click
import pytest

from agent_env.contributions import StoreBackend
from agent_env.hookspecs import hookimpl
from agent_env.plugins import ACTIVE, FAILED, SKIPPED, PluginHost
from agent_env.plugins.reporting import package_rows, problems

CONFIGURABLE = """
from agent_env.hookspecs import hookimpl

SEEN = []

class Greet:
    type = "greet"

@hookimpl
def agent_env_configure(settings):
    SEEN.append(dict(settings))
    Greet.type = settings.get("step_name", "greet")

@hookimpl
def agent_env_step_types():
    return [Greet]
"""


def host_for(*names: str, builtin: tuple[str, ...] = (), **tables: Any) -> PluginHost:
    host = PluginHost(builtin=builtin, only=set(names), settings=lambda: tables)
    host.load()
    return host


def test_configure_hands_each_plugin_its_own_table_before_contributions(toy_site) -> None:
    toy_site("toy-conf", CONFIGURABLE)
    toy_site("toy-other", CONFIGURABLE.replace("greet", "hello"))
    host = host_for(
        "toy-conf", "toy-other",
        **{"toy-conf": {"step_name": "salute"}, "toy_other": {"step_name": "wave"}},
    )
    registry = host.registry("step_type")  # configure runs first, unasked
    assert set(registry) == {"salute", "wave"}
    import toy_conf
    import toy_other

    assert toy_conf.SEEN == [{"step_name": "salute"}]  # once, and only its own table
    assert toy_other.SEEN == [{"step_name": "wave"}]


def test_a_table_naming_no_plugin_is_reported(toy_site, capsys) -> None:
    toy_site("toy-conf", CONFIGURABLE)
    host = host_for("toy-conf", **{"toy-conf": {}, "agentenv-framework-typo": {"x": 1}})
    host.registry("step_type")
    warning = "[plugins.agentenv-framework-typo] names no installed plugin (installed: "
    assert warning in capsys.readouterr().err
    found = problems(host, package_rows(host))
    assert len(found) == 1 and found[0].startswith(warning) and "toy-conf" in found[0]


def test_tryfirst_and_wrappers_apply_to_contribution_hooks() -> None:
    calls: list[str] = []

    class Late:
        @hookimpl(trylast=True)
        def agent_env_stores(self) -> list[StoreBackend]:
            calls.append("late")
            return [StoreBackend("object", "late", dict)]

    class Early:
        @hookimpl(tryfirst=True)
        def agent_env_stores(self) -> list[StoreBackend]:
            calls.append("early")
            return [StoreBackend("object", "early", dict)]

    class Wrapper:
        @hookimpl(wrapper=True)
        def agent_env_stores(self) -> Any:
            calls.append("wrap-before")
            result = yield
            calls.append("wrap-after")
            return result

    host = PluginHost(builtin=(), discover=False)
    host.load()
    for name, plugin in (("late", Late()), ("early", Early()), ("wrap", Wrapper())):
        host._register(_record(name), plugin)
    names = [c.name for c in host.contributions("store")]
    assert calls == ["wrap-before", "early", "late", "wrap-after"]
    assert names == ["object:early", "object:late"]
    assert {c.plugin for c in host.contributions("store")} == {"early", "late"}


def test_an_outside_plugin_that_raises_in_a_hook_is_failed_not_fatal(toy_site) -> None:
    toy_site("toy-raise", """
from agent_env.hookspecs import hookimpl

@hookimpl
def agent_env_step_types():
    raise RuntimeError("boom in hook")
""")
    toy_site("toy-ok", CONFIGURABLE)
    host = host_for("toy-raise", "toy-ok")
    assert "greet" in host.registry("step_type")
    record = host.record("toy_raise")
    assert record.status == FAILED and record.reason == "hook-error"
    assert "agent_env_step_types: RuntimeError: boom in hook" in record.detail


def test_run_events_reach_observers_through_pluggy_and_a_failing_one_is_isolated(
    toy_site,
) -> None:
    toy_site("toy-watch", """
from agent_env.hookspecs import hookimpl
EVENTS = []

@hookimpl
def agent_env_run_event(event):
    EVENTS.append(event)
""")
    toy_site("toy-crash", """
from agent_env.hookspecs import hookimpl

@hookimpl(tryfirst=True)
def agent_env_run_event(event):
    raise ValueError("observer bug")
""")
    host = host_for("toy-watch", "toy-crash")
    host.emit("run_started")
    import toy_watch

    assert toy_watch.EVENTS == ["run_started"]  # the crashing observer ran first, and failed
    assert host.record("toy_crash").status == FAILED


def test_the_cli_hook_uses_the_same_conflict_rules(toy_site) -> None:
    command = """
import click
from agent_env.hookspecs import hookimpl

@click.command()
def {name}():
    pass

@hookimpl
def agent_env_cli(cli):
    cli.add_command({name}, "{name}")
"""
    toy_site("toy-run", command.format(name="run"))
    toy_site("toy-a", command.format(name="shared"))
    toy_site("toy-b", command.format(name="shared"))
    toy_site("toy-c", command.format(name="solo"))
    host = host_for(
        "toy-run", "toy-a", "toy-b", "toy-c", builtin=("agent_env.cli.builtin_commands",)
    )
    root = click.Group("agent-env")
    host.extend_cli(root)
    assert root.commands["run"].target == "agent_env.cli.run_cmd:run"  # core wins (lazily)
    assert "shared" not in root.commands and "solo" in root.commands
    statuses = {(c.plugin, c.name): (c.status, c.reason) for c in host.all_contributions()
                if c.kind == "cli_command"}
    assert statuses[("toy_run", "run")] == (SKIPPED, "shadows-builtin")
    assert statuses[("toy_a", "shared")][1] == "name-conflict"
    assert statuses[("toy_c", "solo")] == (ACTIVE, None)


def test_tracing_shows_configure_and_run_events(toy_site, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AGENT_ENV_TRACE_PLUGINS", "1")
    toy_site("toy-conf", CONFIGURABLE)
    host = host_for("toy-conf")
    host.emit("step_started")
    err = capsys.readouterr().err
    assert "[plugins]   agent_env_configure [hook]" in err
    assert "[plugins]   agent_env_run_event [hook]" in err and "step_started" in err


def _record(name: str) -> Any:
    from agent_env.plugins import PluginRecord

    return PluginRecord(name, f"dist-{name}", "1.0", name)


@pytest.fixture(autouse=True)
def _forget_toy_modules() -> Any:
    import sys

    yield
    for name in [m for m in sys.modules if m.startswith("toy_")]:
        sys.modules.pop(name, None)

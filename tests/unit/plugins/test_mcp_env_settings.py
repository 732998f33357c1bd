"""mcp_env's ``[plugins.agentenv-framework-mcp-env]`` table: checked by the kernel's
``build_settings``, kept in the runtime's state (no module global), read by the deploy step."""

from __future__ import annotations

from typing import Any

import pytest

import agentenv_mcp_env.steps as steps
from agent_env.api import ConfigError
from agent_env.runtime import Runtime, use
from agentenv_mcp_env.settings import McpEnvSettings, configure, mcp_env_settings

TABLE = "agentenv-framework-mcp-env"


def configured(**table: Any) -> Runtime:
    runtime = Runtime()
    runtime.configure(plugins={TABLE: table})
    runtime.host  # noqa: B018  hands every plugin its table
    return runtime


def test_progress_reaches_the_runtime_state_and_defaults_to_true() -> None:
    quiet = configured(progress=False)
    assert quiet.state["mcp_env"] == McpEnvSettings(progress=False)
    assert configured().state["mcp_env"] == McpEnvSettings(progress=True)
    with use(quiet):
        assert mcp_env_settings().progress is False
    with use(Runtime()):  # nothing handed over yet: the defaults
        assert mcp_env_settings() == McpEnvSettings()


def test_two_runtimes_keep_their_own_settings() -> None:
    loud, quiet = configured(progress=True), configured(progress=False)
    with use(quiet):
        assert mcp_env_settings().progress is False
    with use(loud):
        assert mcp_env_settings().progress is True
    assert not hasattr(steps, "PROGRESS")  # no module-level state left


def test_an_unknown_key_is_one_config_error_naming_the_known_ones() -> None:
    with use(Runtime()), pytest.raises(ConfigError) as unknown:
        configure({"progres": False})
    assert unknown.value.message == (
        "[plugins.agentenv-framework-mcp-env] has unknown setting(s) progres for the mcp_env "
        "plugin (known: db_mcp, progress)"
    )
    with use(Runtime()), pytest.raises(ConfigError, match=r"invalid setting.*progress"):
        configure({"progress": "no"})


def test_a_refused_table_is_the_one_line_error_of_the_command() -> None:
    runtime = Runtime()
    runtime.configure(plugins={TABLE: {"progres": False}})
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) progres for the mcp_env "
                       r"plugin \(known: db_mcp, progress\)"):
        runtime.host  # noqa: B018  the host hands every plugin its table when built
    with pytest.raises(ConfigError, match="progres"):  # and again: nothing half-configured
        runtime.host  # noqa: B018

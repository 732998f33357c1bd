"""One message for a missing contribution: not installed, installed but broken, or unknown."""

from __future__ import annotations

import pytest

from agent_env.contributions import Lazy
from agent_env.errors import MissingPluginError
from agent_env.hookspecs import hookimpl
from agent_env.plugins import FAILED, PluginHost, PluginRecord
from agent_env.plugins.reporting import missing
from agent_env.runtime import Runtime


def bare_host() -> PluginHost:
    host = PluginHost(builtin=("agent_env.sandbox.builtin",), discover=False)
    host.load()
    return host


def test_not_installed_names_the_extra() -> None:
    error = missing(bare_host(), "sandbox_provider", "tenki")
    assert error.message == (
        "the 'tenki' sandbox provider comes from the tenki plugin, which is not installed "
        "(pip install 'agentenv-framework[tenki]')"
    )


def test_installed_but_broken_says_so_and_where_to_look() -> None:
    host = bare_host()
    host.records.append(PluginRecord(
        "aws_stores", "agentenv-framework-aws-stores", "0.1.0", "agentenv_aws_stores.plugin",
        status=FAILED, reason="import-error", detail="ModuleNotFoundError: No module named 'x'",
    ))
    error = missing(host, "store", "object:s3")
    assert error.message == (
        "the 's3' object store comes from the aws_stores plugin, which is installed but failed "
        "(import-error: ModuleNotFoundError: No module named 'x'); "
        "see `agent-env plugin show aws_stores`"
    )


def test_unknown_lists_what_is_installed() -> None:
    error = missing(bare_host(), "sandbox_provider", "nosuch")
    assert error.message == "no sandbox provider named 'nosuch' (installed: local)"


def test_a_lazy_contribution_that_cannot_be_imported_fails_its_plugin_clearly() -> None:
    class Broken:
        @hookimpl
        def agent_env_sandbox_providers(self) -> list[Lazy]:
            return [Lazy("ghost", "agentenv_no_such_module:Provider")]

    host = bare_host()
    record = PluginRecord("broken", "toy-broken", "1.0", "broken")
    host.records.append(record)
    host._register(record, Broken())
    assert "ghost" in host.registry("sandbox_provider")  # listing imports nothing
    rt = Runtime(host=host)
    with pytest.raises(MissingPluginError, match=r"'ghost' comes from plugin toy-broken, which "
                       r"is broken \(agentenv_no_such_module:Provider: ModuleNotFoundError"):
        rt.provider("ghost")
    assert record.status == FAILED and record.reason == "import-error"
    assert type(rt.provider("local")).__name__ == "LocalSandboxProvider"  # others unaffected

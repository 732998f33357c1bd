"""A fallback chain hands a sandbox on when a provider cannot make it, and says why.

The two providers here are toys registered on a bare plugin host: one whose service refuses
every create (as a cloud out of quota does), one that makes an in-memory sandbox.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from agent_env.api import (
    ConfigError,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    create_in_chain,
)
from agent_env.hookspecs import hookimpl
from agent_env.plugins import PluginHost, PluginRecord
from agent_env.runtime import Runtime, use


class ToySandbox(Sandbox):
    provider_name = "spare"

    def __init__(self) -> None:
        self.id = "toy-1"

    async def exec(self, command: Any, **_: Any) -> ExecResult:
        return ExecResult(0)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        return None

    async def get_file(self, path: str) -> bytes:
        return b""

    async def expose(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    async def terminate(self) -> None:
        return None


class OutOfQuota(SandboxProvider):
    name: ClassVar[str] = "broke"
    asked: ClassVar[list[str]] = []

    async def create(self, spec: SandboxSpec) -> Sandbox:
        self.asked.append(spec.name)
        raise SandboxError("broke could not create sandbox: quota exhausted")

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        return None


class Spare(SandboxProvider):
    name: ClassVar[str] = "spare"

    async def create(self, spec: SandboxSpec) -> Sandbox:
        return ToySandbox()

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        return None


class Unconfigured(SandboxProvider):
    name: ClassVar[str] = "unset"

    def __init__(self) -> None:
        raise ConfigError("the unset sandbox provider needs an API key")

    async def create(self, spec: SandboxSpec) -> Sandbox:
        raise AssertionError("never made")

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        return None


class Toys:
    @hookimpl
    def agent_env_sandbox_providers(self) -> list[type]:
        return [OutOfQuota, Spare, Unconfigured]


@pytest.fixture
def runtime() -> Any:
    host = PluginHost(builtin=("agent_env.sandbox.builtin",), discover=False)
    host.load()
    host._register(PluginRecord("toys", "toy-providers", "1.0", "toys"), Toys())
    with use(Runtime(host=host)) as current:
        yield current


async def test_a_refused_create_goes_to_the_next_provider_and_says_why(runtime: Any) -> None:
    notes: list[str] = []
    sandbox, passed = await create_in_chain(["broke", "spare"], SandboxSpec(name="env-echo"),
                                            note=notes.append)
    assert sandbox.provider_name == "spare"
    assert passed == ["broke: broke could not create sandbox: quota exhausted"]
    assert notes == ["sandbox env-echo: broke: broke could not create sandbox: quota "
                     "exhausted; trying spare"]


async def test_the_last_failure_is_raised_and_config_errors_are_never_passed_over(
    runtime: Any,
) -> None:
    with pytest.raises(SandboxError, match="quota exhausted"):
        await create_in_chain(["broke"], SandboxSpec(name="a"))
    with pytest.raises(ConfigError, match="needs an API key"):
        await create_in_chain(["unset", "spare"], SandboxSpec(name="b"))


async def test_an_unknown_provider_is_skipped_as_choose_provider_skips_it(runtime: Any) -> None:
    sandbox, passed = await create_in_chain(["nosuch", "spare"], SandboxSpec(name="c"))
    assert (sandbox.provider_name, passed) == ("spare", [])

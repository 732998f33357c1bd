"""docker_env's settings: its plugin table (``build_timeout``) and its provider's config table,
both checked by the kernel, and a build_timeout that really stops a slow build."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_env.api import ConfigError, SandboxSpec, UserError
from agent_env.runtime import Runtime, use
from agentenv_docker_env.build import BuildTimedOut, build_image
from agentenv_docker_env.sandbox import DockerSandboxProvider
from agentenv_docker_env.settings import DockerEnvSettings, docker_env_settings

pytestmark = pytest.mark.docker

TABLE = "agentenv-framework-docker-env"
SLOW = "FROM python:3.11-slim\nRUN sleep 30\n"


def configured(**table: Any) -> Runtime:
    """A runtime whose docker_env got ``[plugins.agentenv-framework-docker-env]`` = table."""
    runtime = Runtime()
    runtime.configure(plugins={TABLE: table})
    runtime.host  # noqa: B018  hands every plugin its table
    return runtime


def test_build_timeout_reaches_the_plugin_state_and_defaults_to_half_an_hour() -> None:
    assert configured().state["docker_env"] == DockerEnvSettings(build_timeout=1800.0)
    runtime = configured(build_timeout=600)
    assert runtime.state["docker_env"].build_timeout == 600.0
    with use(runtime):
        assert docker_env_settings().build_timeout == 600.0
    assert docker_env_settings() == DockerEnvSettings()  # another runtime: its own state


def refused(**table: Any) -> str:
    """The one-line error a command stops with when docker_env refuses ``table``."""
    runtime = Runtime()
    runtime.configure(plugins={"agentenv-framework-docker-env": table})
    with pytest.raises(ConfigError) as caught:
        runtime.host  # noqa: B018  the host hands every plugin its table when built
    return caught.value.message


def test_an_unknown_or_bad_plugin_setting_is_one_line_naming_the_known_ones() -> None:
    assert refused(build_timout=5) == (
        "[plugins.agentenv-framework-docker-env] has unknown "
        "setting(s) build_timout for the docker_env plugin (known: build_timeout)"
    )
    assert "build_timeout must be a positive number of seconds" in refused(build_timeout=0)
    with pytest.raises(ConfigError, match="known: build_timeout"):  # what the hook raises
        from agentenv_docker_env.settings import configure

        with use(Runtime()):
            configure({"build_timout": 5})


def test_the_provider_table_is_checked_by_the_kernel() -> None:
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"docker": {"config": {"internal_netwrok": True}}}})
    with pytest.raises(ConfigError) as unknown:
        runtime.provider("docker")
    assert unknown.value.message == (
        "[sandbox.providers.docker.config] has unknown setting(s) internal_netwrok for the "
        "'docker' sandbox provider (known: base_url, default_image, default_memory_mb, "
        "internal_network)"
    )
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"docker": {"config": {"default_memory_mb": 2}}}})
    with pytest.raises(ConfigError, match="default_memory_mb must be a whole number of MiB"):
        runtime.provider("docker")
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"docker": {"config": {"internal_network": True}}}})
    provider = runtime.provider("docker")
    assert isinstance(provider, DockerSandboxProvider) and provider.internal_network is True


def test_a_small_build_timeout_stops_a_slow_build(tmp_path: Path, docker_client: Any) -> None:
    """``RUN sleep 30`` with build_timeout = 2, through the sandbox as a deploy builds."""
    context = tmp_path / "slow"
    context.mkdir()
    (context / "Dockerfile").write_text(SLOW + f"# {uuid.uuid4().hex}\n")  # never cached
    runtime = configured(build_timeout=2)

    async def build() -> str:
        provider = runtime.provider("docker")
        sandbox = await provider.create(SandboxSpec(
            name="slow-build", mode="vm", labels={"agentenv.run": f"test-{uuid.uuid4().hex[:8]}"},
        ))
        try:
            return await sandbox.build_image(str(context), f"t-{uuid.uuid4().hex[:8]}",
                                             labels={})
        finally:
            await sandbox.terminate()

    started = time.monotonic()
    with use(runtime), pytest.raises(BuildTimedOut) as stopped:
        asyncio.run(build())
    took = time.monotonic() - started
    assert took < 15, f"the build ran {took:.1f}s despite build_timeout = 2"
    assert isinstance(stopped.value, UserError) and not stopped.value.notes
    message = stopped.value.message
    assert "\n" not in message
    assert "build_timeout = 2 seconds" in message
    assert "raise build_timeout in [plugins.agentenv-framework-docker-env]" in message


def test_an_explicit_timeout_stops_a_direct_build(tmp_path: Path, docker_client: Any) -> None:
    context = tmp_path / "slow"
    context.mkdir()
    (context / "Dockerfile").write_text(SLOW + f"# {uuid.uuid4().hex}\n")
    started = time.monotonic()
    with pytest.raises(BuildTimedOut, match=r"build_timeout = 1\.5 seconds"):
        build_image(context, name=f"t-{uuid.uuid4().hex[:8]}", timeout=1.5,
                    client=docker_client)
    assert time.monotonic() - started < 12

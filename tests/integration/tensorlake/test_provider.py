"""What the tensorlake provider asks the Tensorlake API for, its config errors, and the CLI.

The requests are the ones the real SDK sent to the fake API (:mod:`fake_tensorlake`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cloud_cases import cli_without_credentials
from fake_tensorlake import API_KEY, FakeTensorlake

from agent_env.api import ConfigError, SandboxSpec, SandboxUnsupported
from agent_env.runtime import Runtime
from agentenv_tensorlake.provider import DEFAULT_IMAGE, TensorlakeSandboxProvider

AGENT_ENV = str(Path(sys.executable).with_name("agent-env"))


def provider_from(settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"tensorlake": {"config": settings}}})
    return runtime.provider("tensorlake")


def test_a_missing_api_key_is_one_error_naming_the_key_and_where_to_set_it() -> None:
    with pytest.raises(ConfigError) as missing:
        provider_from({})
    message = missing.value.message
    assert "api_key" in message and "[sandbox.providers.tensorlake.config]" in message
    assert "env:TENSORLAKE_API_KEY" in message and "\n" not in message
    with pytest.raises(ConfigError, match="api_key"):
        provider_from({"api_key": ""})


def test_an_unknown_config_key_is_refused_by_the_kernel_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as refused:
        provider_from({"api_key": "k", "imgae": "x"})
    assert refused.value.message == (
        "[sandbox.providers.tensorlake.config] has unknown setting(s) imgae for the "
        "'tensorlake' sandbox provider (known: api_key, api_url, image, organization_id, "
        "project_id, startup_timeout)"
    )


def test_known_settings_reach_the_provider() -> None:
    provider = provider_from({"api_key": "k", "image": "mine", "startup_timeout": 5})
    assert isinstance(provider, TensorlakeSandboxProvider)
    assert (provider.image, provider.startup_timeout) == ("mine", 5.0)


def test_available_when_the_sdk_is_installed() -> None:
    assert TensorlakeSandboxProvider.availability() is None


@pytest.mark.docker
async def test_create_sends_resources_ttl_ports_and_the_default_image(
    fake_tensorlake: FakeTensorlake,
) -> None:
    provider = TensorlakeSandboxProvider.from_config(api_key=API_KEY, api_url=fake_tensorlake.url)
    sandbox = await provider.create(SandboxSpec(
        name="Env Echo", mode="vm", cpu=2.0, memory_mb=2048, disk_mb=8192, ttl_seconds=600,
        ports=(8080,),
    ))
    try:
        [create] = fake_tensorlake.calls("POST", r"/v1/namespaces/default/sandboxes$")
        assert create["headers"]["authorization"] == f"Bearer {API_KEY}"
        sent = create["json"]
        assert sent["image"] == DEFAULT_IMAGE == "agentenv-dind-host-v1"
        assert sent["resources"] == {"cpus": 2.0, "memory_mb": 2048, "disk_mb": 8192}
        assert sent["timeout_secs"] == 600
        assert sent["exposed_ports"] == [8080]
        assert sent["name"].startswith("agentenv-vm-env-echo-")
        assert (sent.get("network") or {}).get("allow_internet_access", True) is True
        assert sandbox.describe() == {"id": sandbox.id, "provider": "tensorlake", "mode": "vm",
                                      "image": DEFAULT_IMAGE}
    finally:
        await sandbox.terminate()
    assert fake_tensorlake.calls("DELETE", rf"/sandboxes/{sandbox.id}$")
    assert sandbox.id not in fake_tensorlake.sandboxes


@pytest.mark.docker
async def test_image_is_overridable_and_no_internet_is_enforced_by_the_api(
    fake_tensorlake: FakeTensorlake,
) -> None:
    provider = TensorlakeSandboxProvider.from_config(
        api_key=API_KEY, api_url=fake_tensorlake.url, image="plain-python")
    sandbox = await provider.create(SandboxSpec(name="p", mode="vm", network_policy="no-internet"))
    try:
        [create] = fake_tensorlake.calls("POST", r"/sandboxes$")
        assert create["json"]["image"] == "plain-python"
        assert create["json"]["network"]["allow_internet_access"] is False
        # plain-python has no Docker daemon: running env containers is refused, saying why
        with pytest.raises(SandboxUnsupported, match=r"has no dockerd.*set image in"):
            await sandbox.build_image("/nonexistent", "x", labels={})
    finally:
        await sandbox.terminate()


def test_run_echo_mcp_without_an_api_key_fails_naming_the_missing_key(tmp_path: Path) -> None:
    """The issue's "done when": the CLI, as a user runs it, with no config at all."""
    cli_without_credentials("tensorlake", tmp_path, env_prefixes=("TENSORLAKE_",), error=(
        "the tensorlake sandbox provider needs an API key: set api_key in "
        "[sandbox.providers.tensorlake.config]"))


def test_the_plugin_is_listed_active() -> None:
    done = subprocess.run([AGENT_ENV, "plugin", "list"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("agentenv-framework-tensorlake ")]
    assert "1 sandbox provider" in line and line.rstrip().endswith("active")

"""What the e2b provider asks E2B for, its config errors, its faults, the CLI and echo-mcp.

The requests are the ones the real SDK sent to the fake E2B (:mod:`fake_e2b`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from cloud_cases import cli_without_credentials, gc_finds_an_expired_leftover, run_echo_mcp
from fake_e2b import DOCKER_TEMPLATE, FakeE2B, fake_settings

from agent_env.api import ConfigError, SandboxError, SandboxSpec, SandboxUnsupported
from agent_env.runtime import Runtime
from agentenv_e2b.provider import E2BSandboxProvider


def provider_from(settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"e2b": {"config": settings}}})
    return runtime.provider("e2b")


def on_fake(fake: FakeE2B, **settings: object) -> E2BSandboxProvider:
    return E2BSandboxProvider.from_config(**fake_settings(fake, **settings))


def test_the_reference_config_section_is_accepted_and_its_keys_are_required() -> None:
    provider = provider_from({"api_key": "e2b_x", "base_template": "team/docker-host"})
    assert isinstance(provider, E2BSandboxProvider)
    assert provider.base_template == "team/docker-host"
    with pytest.raises(ConfigError) as missing:
        provider_from({"base_template": "t"})
    assert "api_key" in missing.value.message and "env:E2B_API_KEY" in missing.value.message
    with pytest.raises(ConfigError) as no_template:
        provider_from({"api_key": "k"})
    assert "base_template" in no_template.value.message
    assert "[sandbox.providers.e2b.config]" in no_template.value.message
    with pytest.raises(ConfigError, match=r"unknown setting.*template.*known: api_key, api_url, "
                                          r"base_template, domain, sandbox_url"):
        provider_from({"api_key": "k", "template": "t"})


def test_available_when_the_sdk_is_installed() -> None:
    assert E2BSandboxProvider.availability() is None


@pytest.mark.docker
async def test_create_sends_template_ttl_metadata_env_and_policy(fake_e2b: FakeE2B) -> None:
    sandbox = await on_fake(fake_e2b).create(SandboxSpec(
        name="env-echo", mode="vm", ttl_seconds=900, env_vars={"A": "1"},
        labels={"agentenv.run": "r1"}, network_policy="no-internet",
    ))
    try:
        [create] = fake_e2b.calls("POST", r"^/sandboxes$")
        assert create["headers"]["x-api-key"] == "e2b_test_key"
        sent = create["json"]
        assert sent["templateID"] == DOCKER_TEMPLATE and sent["timeout"] == 900
        assert sent["envVars"] == {"A": "1"}
        assert sent["metadata"]["agentenv.run"] == "r1"
        assert sent["metadata"]["agentenv.managed"] == "true"
        assert sent["allow_internet_access"] is False
        assert (await sandbox.exec("echo $A")).stdout == "1\n"
    finally:
        await sandbox.terminate()
    assert fake_e2b.calls("DELETE", rf"^/sandboxes/{sandbox.id}$")
    assert fake_e2b.sandboxes == {}


@pytest.mark.docker
async def test_an_image_of_its_own_is_refused_naming_the_mode(fake_e2b: FakeE2B) -> None:
    with pytest.raises(SandboxUnsupported, match="'e2b' sandbox provider cannot create mode "
                                                 "'container'"):
        await on_fake(fake_e2b).create(SandboxSpec(name="c", mode="container", image="x:1"))
    assert not fake_e2b.calls("POST", r"^/sandboxes$")


@pytest.mark.docker
async def test_a_rate_limited_create_is_retried(fake_e2b: FakeE2B) -> None:
    fake_e2b.create_faults = [(429, "You have reached the maximum number of concurrent "
                                    "E2B sandboxes")]
    started = time.monotonic()
    sandbox = await on_fake(fake_e2b).create(SandboxSpec(name="r", mode="vm"))
    try:
        assert len(fake_e2b.calls("POST", r"^/sandboxes$")) == 2
        assert time.monotonic() - started >= 1.0
    finally:
        await sandbox.terminate()


@pytest.mark.docker
@pytest.mark.parametrize(("fault", "expected"), [
    ((401, "Invalid API key"), "e2b refused the API key: check api_key in "
     "[sandbox.providers.e2b.config]"),
    ((404, "template 'nope' not found"), "e2b could not create a sandbox from template "
     f"{DOCKER_TEMPLATE}: 404: template 'nope' not found"),
])
async def test_refused_creates_are_one_error_and_leave_nothing(
    fake_e2b: FakeE2B, fault: tuple[int, str], expected: str,
) -> None:
    fake_e2b.create_faults = [fault]
    with pytest.raises(SandboxError) as refused:
        await on_fake(fake_e2b).create(SandboxSpec(name="q", mode="vm"))
    assert str(refused.value).startswith(expected), refused.value
    assert "\n" not in str(refused.value)
    assert len(fake_e2b.calls("POST", r"^/sandboxes$")) == 1
    assert fake_e2b.sandboxes == {}


@pytest.mark.docker
async def test_a_sandbox_the_service_kills_mid_run_is_minus_one_then_gone(
    fake_e2b: FakeE2B,
) -> None:
    provider = on_fake(fake_e2b)
    sandbox = await provider.create(SandboxSpec(name="v", mode="vm"))
    fake_e2b.vanish(sandbox.id)
    result = await sandbox.exec("echo still here")
    assert result.exit_code == -1 and "still here" not in result.stdout
    assert f"lost e2b sandbox {sandbox.id}" in result.stderr
    await sandbox.terminate()  # already gone: no error
    assert await provider.attach(sandbox.id) is None


@pytest.mark.docker
async def test_a_create_cancelled_mid_way_leaves_no_sandbox(fake_e2b: FakeE2B) -> None:
    fake_e2b.create_delay = 1.5
    create = asyncio.ensure_future(on_fake(fake_e2b).create(SandboxSpec(name="c", mode="vm")))
    await asyncio.sleep(0.5)
    create.cancel()
    with pytest.raises(asyncio.CancelledError):
        await create
    assert fake_e2b.calls("DELETE", r"^/sandboxes/")
    assert fake_e2b.sandboxes == {}
    assert fake_e2b.containers.leftovers() == []


@pytest.mark.docker
async def test_a_command_past_its_timeout_is_124(fake_e2b: FakeE2B) -> None:
    sandbox = await on_fake(fake_e2b).create(SandboxSpec(name="t", mode="vm"))
    try:
        result = await sandbox.exec("sleep 30", timeout=1)
        assert result.exit_code == 124 and "timed out after 1s" in result.stderr
    finally:
        await sandbox.terminate()


@pytest.mark.docker
async def test_gc_finds_an_expired_leftover_by_its_metadata(fake_e2b: FakeE2B) -> None:
    await gc_finds_an_expired_leftover(on_fake(fake_e2b), fake_settings(fake_e2b))
    assert fake_e2b.sandboxes == {}


@pytest.mark.docker
@pytest.mark.slow
def test_echo_mcp_deploys_answers_and_is_torn_down(
    fake_e2b: FakeE2B, capsys: pytest.CaptureFixture[str]
) -> None:
    run_echo_mcp("e2b", fake_settings(fake_e2b), capsys)
    assert fake_e2b.calls("POST", r"^/sandboxes$")
    assert fake_e2b.calls("POST", r"^/process.Process/Start$")
    assert fake_e2b.calls("DELETE", r"^/sandboxes/")
    assert fake_e2b.sandboxes == {}
    assert fake_e2b.containers.leftovers() == []


def test_run_echo_mcp_without_an_api_key_fails_naming_the_missing_key(tmp_path: Path) -> None:
    cli_without_credentials("e2b", tmp_path, env_prefixes=("E2B_",), error=(
        "the e2b sandbox provider needs an API key: set api_key in "
        "[sandbox.providers.e2b.config]"))

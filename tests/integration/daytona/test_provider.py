"""What the daytona provider asks Daytona for, its config errors, its faults, and the CLI.

The requests are the ones the real SDK sent to the fake API (:mod:`fake_daytona`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from cloud_cases import cli_without_credentials, gc_finds_an_expired_leftover
from fake_daytona import API_KEY, DOCKER_SNAPSHOT, FakeDaytona

from agent_env.api import ConfigError, SandboxError, SandboxSpec
from agent_env.runtime import Runtime
from agentenv_daytona.provider import DEFAULT_BASE_IMAGE, DaytonaSandboxProvider


def provider_from(settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"daytona": {"config": settings}}})
    return runtime.provider("daytona")


def on_fake(fake: FakeDaytona, **settings: object) -> DaytonaSandboxProvider:
    return DaytonaSandboxProvider.from_config(api_key=API_KEY, api_url=f"{fake.url}/api",
                                              **settings)


def test_a_missing_api_key_is_one_error_naming_the_key_and_where_to_set_it() -> None:
    with pytest.raises(ConfigError) as missing:
        provider_from({})
    message = missing.value.message
    assert "api_key" in message and "[sandbox.providers.daytona.config]" in message
    assert "env:DAYTONA_API_KEY" in message and "\n" not in message


def test_the_reference_config_section_is_accepted_unchanged() -> None:
    """The reference's README section, every key of it."""
    provider = provider_from({
        "api_key": "dtn_x", "api_url": "https://app.daytona.io/api", "target": "eu",
        "base_image": "ubuntu:24.04", "egress_hosts": ["*.internal.example"],
    })
    assert isinstance(provider, DaytonaSandboxProvider)
    assert (provider.target, provider.base_image) == ("eu", "ubuntu:24.04")
    assert provider_from({"api_key": "k", "snapshot": "my-docker-host"}).snapshot == \
        "my-docker-host"


def test_bad_settings_are_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigError, match="snapshot or base_image, not both"):
        provider_from({"api_key": "k", "snapshot": "s", "base_image": "b"})
    with pytest.raises(ConfigError, match="egress_hosts must be a list"):
        provider_from({"api_key": "k", "egress_hosts": "*.example"})
    with pytest.raises(ConfigError) as refused:
        provider_from({"api_key": "k", "snapshots": "x"})
    assert "unknown setting(s) snapshots" in refused.value.message
    assert "known: api_key, api_url, base_image, egress_hosts, snapshot, target" in \
        refused.value.message


def test_available_when_the_sdk_is_installed() -> None:
    assert DaytonaSandboxProvider.availability() is None


@pytest.mark.docker
async def test_create_sends_size_ttl_labels_env_and_the_docker_host_image(
    fake_daytona: FakeDaytona,
) -> None:
    sandbox = await on_fake(fake_daytona).create(SandboxSpec(
        name="Env Echo", mode="vm", cpu=1.0, memory_mb=2048, disk_mb=8192, ttl_seconds=600,
        env_vars={"A": "1"}, labels={"agentenv.run": "r1"},
    ))
    try:
        [create] = fake_daytona.calls("POST", r"^/api/sandbox$")
        assert create["headers"]["authorization"] == f"Bearer {API_KEY}"
        sent = create["json"]
        # raised to Daytona's Docker-in-Docker floor: 2 vCPU, 4 GiB, 10 GiB
        assert (sent["cpu"], sent["memory"], sent["disk"]) == (2, 4, 10)
        assert sent["ttlMinutes"] == 10 and sent["autoStopInterval"] == 0
        assert sent["public"] is True and sent["env"] == {"A": "1"}
        assert sent["labels"]["agentenv.run"] == "r1"
        assert sent["labels"]["agentenv.managed"] == "true"
        assert sent["name"].startswith("agentenv-vm-env-echo-")
        dockerfile = sent["buildInfo"]["dockerfileContent"]
        assert dockerfile.startswith(f"FROM {DEFAULT_BASE_IMAGE}")
        assert "docker-ce" in dockerfile and "docker-compose-plugin" in dockerfile
        assert not sent.get("networkBlockAll")
        assert sandbox.describe()["mode"] == "vm"
    finally:
        await sandbox.terminate()
    assert fake_daytona.calls("DELETE", rf"/sandbox/{sandbox.id}$")
    assert fake_daytona.sandboxes == {}


@pytest.mark.docker
async def test_a_snapshot_is_booted_as_is_and_no_internet_blocks_all(
    fake_daytona: FakeDaytona,
) -> None:
    sandbox = await on_fake(fake_daytona, snapshot=DOCKER_SNAPSHOT).create(
        SandboxSpec(name="s", mode="vm", network_policy="no-internet"))
    try:
        sent = fake_daytona.calls("POST", r"^/api/sandbox$")[0]["json"]
        assert sent["snapshot"] == DOCKER_SNAPSHOT and not sent.get("buildInfo")
        assert sent["networkBlockAll"] is True
        assert (await sandbox.exec("docker version --format ok")).stdout.strip() == "ok"
    finally:
        await sandbox.terminate()


@pytest.mark.docker
async def test_a_rate_limited_create_is_retried_after_the_servers_hint(
    fake_daytona: FakeDaytona,
) -> None:
    fake_daytona.create_faults = [(429, "Too many requests", {"Retry-After": "1"})] * 2
    started = time.monotonic()
    sandbox = await on_fake(fake_daytona).create(SandboxSpec(name="r", mode="container"))
    try:
        assert len(fake_daytona.calls("POST", r"^/api/sandbox$")) == 3
        assert time.monotonic() - started >= 2.0  # it waited as told, twice
        assert (await sandbox.exec("echo ok")).stdout == "ok\n"
    finally:
        await sandbox.terminate()


@pytest.mark.docker
@pytest.mark.parametrize(("status", "message", "expected"), [
    (403, "Total CPU limit exceeded. Maximum allowed: 10", "CPU limit exceeded"),
    (401, "Invalid API key", "refused the API key: check api_key in "
     "[sandbox.providers.daytona.config]"),
])
async def test_quota_and_credential_refusals_are_one_error_and_leave_nothing(
    fake_daytona: FakeDaytona, status: int, message: str, expected: str,
) -> None:
    fake_daytona.create_faults = [(status, message, {})]
    with pytest.raises(SandboxError) as refused:
        await on_fake(fake_daytona).create(SandboxSpec(name="q", mode="container"))
    text = str(refused.value)
    assert "daytona" in text and expected in text and "\n" not in text
    assert len(fake_daytona.calls("POST", r"^/api/sandbox$")) == 1  # not retried
    assert fake_daytona.sandboxes == {}


@pytest.mark.docker
async def test_a_wrong_key_is_refused_by_the_api(fake_daytona: FakeDaytona) -> None:
    provider = DaytonaSandboxProvider.from_config(api_key="dtn_wrong",
                                                  api_url=f"{fake_daytona.url}/api")
    with pytest.raises(SandboxError, match="daytona refused the API key"):
        await provider.create(SandboxSpec(name="w", mode="container"))
    assert fake_daytona.sandboxes == {}


@pytest.mark.docker
async def test_a_sandbox_the_service_deletes_mid_run_is_minus_one_then_gone(
    fake_daytona: FakeDaytona,
) -> None:
    provider = on_fake(fake_daytona)
    sandbox = await provider.create(SandboxSpec(name="v", mode="container"))
    fake_daytona.vanish(sandbox.id)
    result = await sandbox.exec("echo still here")
    assert result.exit_code == -1 and "still here" not in result.stdout
    assert f"lost daytona sandbox {sandbox.id}" in result.stderr
    await sandbox.terminate()  # already gone: no error
    assert await provider.attach(sandbox.id) is None


@pytest.mark.docker
async def test_a_create_cancelled_mid_way_leaves_no_sandbox(fake_daytona: FakeDaytona) -> None:
    """Ctrl-C while Daytona is still creating: the sandbox it makes is deleted once it
    answers, and the cancellation still reaches the caller."""
    fake_daytona.create_delay = 1.5
    create = asyncio.ensure_future(on_fake(fake_daytona).create(
        SandboxSpec(name="c", mode="container")))
    await asyncio.sleep(0.5)
    create.cancel()
    with pytest.raises(asyncio.CancelledError):
        await create
    assert fake_daytona.calls("POST", r"^/api/sandbox$")
    assert fake_daytona.calls("DELETE", r"^/api/sandbox/")
    assert fake_daytona.sandboxes == {}
    assert fake_daytona.containers.leftovers() == []


@pytest.mark.docker
async def test_gc_finds_an_expired_leftover_by_its_labels(fake_daytona: FakeDaytona) -> None:
    await gc_finds_an_expired_leftover(on_fake(fake_daytona), {
        "api_key": API_KEY, "api_url": f"{fake_daytona.url}/api"}, mode="container")
    assert fake_daytona.sandboxes == {}


def test_run_echo_mcp_without_an_api_key_fails_naming_the_missing_key(tmp_path: Path) -> None:
    cli_without_credentials("daytona", tmp_path, env_prefixes=("DAYTONA_",), error=(
        "the daytona sandbox provider needs an API key: set api_key in "
        "[sandbox.providers.daytona.config]"))

"""What the boxd provider asks boxd for, its config errors, its faults, the CLI and echo-mcp.

The calls are the ones the real SDK made to the fake boxd (:mod:`fake_boxd`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from cloud_cases import cli_without_credentials, gc_finds_an_expired_leftover, run_echo_mcp
from fake_boxd import SNAPSHOT, FakeBoxd, fake_settings

from agent_env.api import ConfigError, SandboxError, SandboxSpec, SandboxUnsupported
from agent_env.runtime import Runtime
from agentenv_boxd.provider import BoxdSandboxProvider


def provider_from(settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"boxd": {"config": settings}}})
    return runtime.provider("boxd")


def on_fake(fake: FakeBoxd, **settings: object) -> BoxdSandboxProvider:
    return BoxdSandboxProvider.from_config(**fake_settings(fake, **settings))


def test_the_reference_config_section_is_accepted_unchanged() -> None:
    provider = provider_from({"api_key": "bxd_x", "org": "team", "snapshot": "warm",
                              "base_url": "https://boxd.sh:9443"})
    assert isinstance(provider, BoxdSandboxProvider)
    assert (provider.org, provider.snapshot, provider.proxy_scheme) == ("team", "warm", "https")
    with pytest.raises(ConfigError) as missing:
        provider_from({})
    assert "api_key" in missing.value.message and "env:BOXD_API_KEY" in missing.value.message
    assert BoxdSandboxProvider.availability() is None


@pytest.mark.docker
async def test_create_sends_an_isolated_labelled_sized_machine_with_a_timer(
    fake_boxd: FakeBoxd,
) -> None:
    sandbox = await on_fake(fake_boxd).create(SandboxSpec(
        name="env-echo", mode="vm", cpu=1.0, memory_mb=8192, ttl_seconds=900,
        env_vars={"A": "1"}, labels={"agentenv.run": "r1"},
    ))
    try:
        [create] = fake_boxd.called("CreateVm")
        assert create.isolated and create.name.startswith("agentenv-")
        assert (create.config.vcpu, create.config.memory_bytes) == (2, 8 << 30)
        assert dict(create.labels) == {"agentenv.run": "r1", "agentenv.managed": "true"}
        [timer] = fake_boxd.called("SetDeleteAfter")
        assert timer.delete_after_secs == 900
        assert (await sandbox.exec("echo $A")).stdout == "1\n"  # spec env reaches every exec
    finally:
        await sandbox.terminate()
    assert fake_boxd.called("DestroyVm") and fake_boxd.machines == {}


@pytest.mark.docker
async def test_a_snapshot_is_restored_and_sizes_past_the_largest_are_refused(
    fake_boxd: FakeBoxd,
) -> None:
    provider = on_fake(fake_boxd, snapshot=SNAPSHOT)
    sandbox = await provider.create(SandboxSpec(name="s", mode="vm"))
    try:
        [restore] = fake_boxd.called("CreateVmFromSnapshot")
        assert restore.snapshot == SNAPSHOT and not fake_boxd.called("CreateVm")
    finally:
        await sandbox.terminate()
    with pytest.raises(SandboxUnsupported, match="largest machine is 8 vCPU and 32 GiB"):
        await provider.create(SandboxSpec(name="big", mode="vm", cpu=16))
    with pytest.raises(SandboxUnsupported, match="cannot create mode 'container'"):
        await provider.create(SandboxSpec(name="c", mode="container", image="x:1"))
    assert len(fake_boxd.called("CreateVmFromSnapshot")) == 1


@pytest.mark.docker
async def test_quota_is_retried_and_a_refused_key_is_one_error(fake_boxd: FakeBoxd) -> None:
    fake_boxd.create_faults = [grpc.StatusCode.RESOURCE_EXHAUSTED]
    sandbox = await on_fake(fake_boxd).create(SandboxSpec(name="q", mode="vm"))
    await sandbox.terminate()
    assert len(fake_boxd.called("CreateVm")) == 2
    fake_boxd.create_faults = [grpc.StatusCode.PERMISSION_DENIED]
    with pytest.raises(SandboxError) as refused:
        await on_fake(fake_boxd).create(SandboxSpec(name="p", mode="vm"))
    assert str(refused.value).startswith("boxd refused the API key: check api_key and org in "
                                         "[sandbox.providers.boxd.config]")
    wrong = BoxdSandboxProvider.from_config(api_key="bxd_wrong", base_url=fake_boxd.base_url)
    with pytest.raises(SandboxError, match="boxd refused the API key"):
        await wrong.create(SandboxSpec(name="w", mode="vm"))
    assert fake_boxd.machines == {}


@pytest.mark.docker
async def test_a_machine_deleted_mid_run_is_minus_one_then_gone(fake_boxd: FakeBoxd) -> None:
    provider = on_fake(fake_boxd)
    sandbox = await provider.create(SandboxSpec(name="v", mode="vm"))
    fake_boxd.vanish(sandbox.id)
    result = await sandbox.exec("echo still here")
    assert result.exit_code == -1 and f"lost boxd machine {sandbox.id}" in result.stderr
    await sandbox.terminate()  # already gone: no error
    assert await provider.attach(sandbox.id) is None


@pytest.mark.docker
async def test_a_create_cancelled_mid_way_leaves_no_machine(fake_boxd: FakeBoxd) -> None:
    fake_boxd.create_delay = 1.5
    create = asyncio.ensure_future(on_fake(fake_boxd).create(SandboxSpec(name="c", mode="vm")))
    await asyncio.sleep(0.5)
    create.cancel()
    with pytest.raises(asyncio.CancelledError):
        await create
    assert fake_boxd.called("DestroyVm")
    assert fake_boxd.machines == {}
    assert fake_boxd.containers.leftovers() == []


@pytest.mark.docker
async def test_gc_finds_an_expired_leftover_by_its_labels(fake_boxd: FakeBoxd) -> None:
    await gc_finds_an_expired_leftover(on_fake(fake_boxd), fake_settings(fake_boxd))
    assert fake_boxd.machines == {}


@pytest.mark.docker
@pytest.mark.slow
def test_echo_mcp_deploys_answers_and_is_torn_down(
    fake_boxd: FakeBoxd, capsys: pytest.CaptureFixture[str]
) -> None:
    run_echo_mcp("boxd", fake_settings(fake_boxd), capsys)
    assert fake_boxd.called("CreateProxy")  # the gateway's public URL
    assert fake_boxd.called("DestroyVm")
    assert fake_boxd.machines == {}
    assert fake_boxd.containers.leftovers() == []


def test_run_echo_mcp_without_an_api_key_fails_naming_the_missing_key(tmp_path: Path) -> None:
    cli_without_credentials("boxd", tmp_path, env_prefixes=("BOXD_",), error=(
        "the boxd sandbox provider needs an API key: set api_key in "
        "[sandbox.providers.boxd.config]"))

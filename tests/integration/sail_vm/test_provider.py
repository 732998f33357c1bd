"""What the sail_vm provider asks Sail for, its config errors, its faults, the CLI and echo-mcp.

The requests are the ones the real SDK sent to the fake Sail (:mod:`fake_sail`).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from cloud_cases import cli_without_credentials, gc_finds_an_expired_leftover, run_echo_mcp
from fake_sail import API_KEY, FakeSail

from agent_env.api import ConfigError, SandboxError, SandboxSpec, SandboxUnsupported
from agent_env.runtime import Runtime
from agentenv_sail_vm.provider import LABELS_FILE, SailSandboxProvider


def provider_from(settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"sail_vm": {"config": settings}}})
    return runtime.provider("sail_vm")


def on_fake(**settings: object) -> SailSandboxProvider:
    return SailSandboxProvider.from_config(**{"api_key": API_KEY, **settings})


def test_the_reference_config_section_is_accepted_unchanged() -> None:
    provider = provider_from({"api_key": API_KEY, "app": "agent-env-prod", "min_size": "m",
                              "auto_sleep": True, "auto_sleep_min_idle_seconds": 600,
                              "runtime_threads": 8, "inject_model_key": True})
    assert isinstance(provider, SailSandboxProvider)
    assert (provider.app, provider.min_size, provider.auto_sleep) == ("agent-env-prod", "m",
                                                                      True)
    with pytest.raises(ConfigError, match=r"min_size in \[sandbox.providers.sail_vm.config\] "
                                          r"must be one of s, m, l, not 'xl'"):
        provider_from({"api_key": API_KEY, "min_size": "xl"})
    with pytest.raises(ConfigError, match="needs an API key: set api_key in"):
        provider_from({})
    assert SailSandboxProvider.availability() is None


def test_the_api_key_is_in_the_environment_only_while_the_sdk_client_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SAIL_API_KEY", raising=False)
    on_fake()._sdk()
    assert "SAIL_API_KEY" not in os.environ  # no process a run starts inherits it


@pytest.mark.docker
async def test_create_sends_size_limits_lifetime_ports_and_policy(fake_sail: FakeSail) -> None:
    sandbox = await on_fake(min_size="s").create(SandboxSpec(
        name="env-echo", mode="vm", cpu=2.0, memory_mb=3000, disk_mb=40_000, ttl_seconds=900,
        ports=(9000,), env_vars={"A": "it's"}, network_policy="no-internet",
        labels={"agentenv.run": "r1"}))
    try:
        [box] = fake_sail.boxes.values()
        sent = box["request"]
        assert sent["name"].startswith("agentenv-env-echo-")
        assert sent["image"] == {"base": "BASE_IMAGE_DEVBOX",
                                 "architecture": "IMAGE_ARCHITECTURE_AMD64"}
        # 2 vCPUs: size m; memory and disk raised to that size's floor
        assert (sent["size"], sent["memory_limit_gib"], sent["state_disk_limit_gib"]) == \
            ("m", 8, 40)
        assert sent["max_lifetime_seconds"] == 900
        assert [p["guest_port"] for p in sent["ingress_ports"]] == [9000]
        assert sent["egress_policy"] == {"allowlist": []}  # nothing out; listeners still in
        assert sent["auto_sleep"]["automatic"] is False
        assert (await sandbox.exec("echo $A")).stdout == "it's\n"
        assert (await sandbox.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
        labels = json.loads(await sandbox.get_file(LABELS_FILE))
        assert labels == {"agentenv.run": "r1", "agentenv.managed": "true"}
        url = await sandbox.expose(9000)
        assert url == f"{fake_sail.url}/_sailbox/{sandbox.id}/9000"
    finally:
        await sandbox.terminate()
    assert fake_sail.running() == []
    with pytest.raises(SandboxUnsupported, match="largest Sailbox is l"):
        await on_fake().create(SandboxSpec(name="big", mode="vm", cpu=16))


@pytest.mark.docker
async def test_a_rate_limited_create_is_retried_and_refusals_are_one_error(
    fake_sail: FakeSail,
) -> None:
    fake_sail.create_faults = [429]
    sandbox = await on_fake().create(SandboxSpec(name="r", mode="vm"))
    await sandbox.terminate()
    with pytest.raises(SandboxError) as refused:
        await on_fake(api_key="sk_wrong").create(SandboxSpec(name="f", mode="vm"))
    assert str(refused.value).startswith("Sail refused the API key: check api_key in "
                                         "[sandbox.providers.sail_vm.config]")
    fake_sail.create_faults = [402]
    with pytest.raises(SandboxError, match=r"Sail could not create Sailbox agentenv-q-.*out of "
                                           r"credit"):
        await on_fake().create(SandboxSpec(name="q", mode="vm"))
    assert "\n" not in str(refused.value)
    assert fake_sail.running() == []


@pytest.mark.docker
async def test_a_sailbox_ended_by_sail_mid_run_is_minus_one_then_gone(
    fake_sail: FakeSail,
) -> None:
    provider = on_fake()
    sandbox = await provider.create(SandboxSpec(name="v", mode="vm"))
    fake_sail.vanish(sandbox.id)
    result = await sandbox.exec("echo still here")
    assert result.exit_code == -1 and f"lost sail sandbox {sandbox.id}" in result.stderr
    await sandbox.terminate()  # already ended: no error
    assert await provider.attach(sandbox.id) is None


@pytest.mark.docker
async def test_a_create_cancelled_mid_way_leaves_no_sailbox(fake_sail: FakeSail) -> None:
    fake_sail.create_delay = 1.5
    create = asyncio.ensure_future(on_fake().create(SandboxSpec(name="c", mode="vm")))
    await asyncio.sleep(0.5)
    create.cancel()
    with pytest.raises(asyncio.CancelledError):
        await create
    assert len(fake_sail.boxes) == 1  # made once Sail answered, then terminated
    assert fake_sail.running() == []
    assert fake_sail.containers.leftovers() == []


@pytest.mark.docker
async def test_gc_finds_an_expired_leftover_by_its_labels_file(fake_sail: FakeSail) -> None:
    await gc_finds_an_expired_leftover(on_fake(), {"api_key": API_KEY})
    assert fake_sail.running() == []


@pytest.mark.docker
@pytest.mark.slow
def test_echo_mcp_deploys_answers_and_is_torn_down(
    fake_sail: FakeSail, capsys: pytest.CaptureFixture[str]
) -> None:
    run_echo_mcp("sail_vm", {"api_key": API_KEY}, capsys)
    assert fake_sail.boxes and fake_sail.running() == []
    assert fake_sail.containers.leftovers() == []


def test_run_echo_mcp_without_a_key_fails_naming_it(tmp_path: Path) -> None:
    cli_without_credentials("sail_vm", tmp_path, env_prefixes=("SAIL",),
                            error="the sail_vm sandbox provider needs an API key")

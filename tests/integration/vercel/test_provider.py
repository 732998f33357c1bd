"""What the vercel provider asks Vercel for, its config errors, its faults, the CLI and echo-mcp.

The requests are the ones the real SDK sent to the fake API (:mod:`fake_vercel`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cloud_cases import cli_without_credentials, gc_finds_an_expired_leftover, run_echo_mcp
from fake_vercel import PROJECT, TEAM, TOKEN, FakeVercel, fake_settings

from agent_env.api import ConfigError, SandboxError, SandboxSpec, SandboxUnsupported
from agent_env.runtime import Runtime
from agentenv_vercel.provider import PUBLIC_PORTS, VercelSandboxProvider


def provider_from(settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"vercel": {"config": settings}}})
    return runtime.provider("vercel")


def on_fake(fake: FakeVercel, **settings: object) -> VercelSandboxProvider:
    return VercelSandboxProvider.from_config(**fake_settings(fake, **settings))


def test_the_reference_config_section_is_accepted_unchanged() -> None:
    provider = provider_from({
        "image": "vercel/sandbox/universal", "region": "iad1", "failover_regions": ["sfo1"],
        "network_id": "net_1", "token": TOKEN, "team_id": TEAM, "project_id": PROJECT,
    })
    assert isinstance(provider, VercelSandboxProvider)
    assert (provider.region, provider.failover_regions) == ("iad1", ["sfo1"])
    with pytest.raises(ConfigError, match=r"token, team_id and project_id together \(missing: "
                                          r"project_id\)"):
        provider_from({"token": TOKEN, "team_id": TEAM})
    assert VercelSandboxProvider.availability() is None


def test_no_credentials_anywhere_is_one_error_naming_the_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("VERCEL_OIDC_TOKEN", "VERCEL_TOKEN", "VERCEL_TEAM_ID", "VERCEL_PROJECT_ID"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError) as missing:
        provider_from({})
    message = missing.value.message
    assert message.startswith("the vercel sandbox provider has no credentials: set token, "
                              "team_id and project_id in [sandbox.providers.vercel.config]")
    assert "\n" not in message


@pytest.mark.docker
async def test_create_sends_ports_size_tags_env_limit_and_policy(fake_vercel: FakeVercel) -> None:
    sandbox = await on_fake(fake_vercel).create(SandboxSpec(
        name="env-echo", mode="vm", cpu=1.0, memory_mb=3000, ttl_seconds=900,
        env_vars={"A": "1"}, network_policy="no-internet", labels={
            "agentenv.run": "r1", "agentenv.step": "deploy", "agentenv.expires": "9",
            "agentenv.owner": "o", "agentenv.state": "s", "agentenv.extra": "x"},
    ))
    try:
        [create] = fake_vercel.calls("POST", r"^/v3/sandboxes$")
        sent = create["json"]
        assert sent["name"].startswith("agentenv-") and sent["image"] == "agentenv-docker"
        assert sent["ports"] == list(PUBLIC_PORTS)
        assert sent["resources"] == {"vcpus": 2, "memory": 4096}  # 3000 MB: 2 vCPUs
        assert sent["env"] == {"A": "1"}
        # at most five tags: the ones gc judges a leftover by
        assert sent["tags"] == {"agentenv.run": "r1", "agentenv.expires": "9",
                                "agentenv.owner": "o", "agentenv.state": "s",
                                "agentenv.managed": "true"}
        assert sent["networkPolicy"]["mode"] == "deny-all"
        assert (await sandbox.exec("echo $A")).stdout == "1\n"
        with pytest.raises(SandboxUnsupported, match="cannot expose port 8080"):
            await sandbox.expose(8080)
    finally:
        await sandbox.terminate()
    assert fake_vercel.calls("DELETE", rf"^/v2/sandboxes/{sandbox.id}$")
    assert fake_vercel.sandboxes == {}


@pytest.mark.docker
async def test_a_rate_limited_create_is_retried_and_refusals_are_one_error(
    fake_vercel: FakeVercel,
) -> None:
    fake_vercel.create_faults = [429]
    sandbox = await on_fake(fake_vercel).create(SandboxSpec(name="r", mode="vm"))
    await sandbox.terminate()
    assert len(fake_vercel.calls("POST", r"^/v3/sandboxes$")) == 2
    fake_vercel.create_faults = [403]
    with pytest.raises(SandboxError) as refused:
        await on_fake(fake_vercel).create(SandboxSpec(name="f", mode="vm"))
    assert str(refused.value).startswith("vercel refused the credentials: check token, team_id "
                                         "and project_id in [sandbox.providers.vercel.config]")
    with pytest.raises(SandboxUnsupported, match="largest sandbox has 32 vCPUs"):
        await on_fake(fake_vercel).create(SandboxSpec(name="big", mode="vm", cpu=64))
    assert fake_vercel.sandboxes == {}


@pytest.mark.docker
async def test_a_sandbox_stopped_mid_run_is_minus_one_then_gone(fake_vercel: FakeVercel) -> None:
    provider = on_fake(fake_vercel)
    sandbox = await provider.create(SandboxSpec(name="v", mode="vm"))
    fake_vercel.vanish(sandbox.id)
    result = await sandbox.exec("echo still here")
    assert result.exit_code == -1 and f"lost vercel sandbox {sandbox.id}" in result.stderr
    await sandbox.terminate()  # already gone: no error
    assert await provider.attach(sandbox.id) is None


@pytest.mark.docker
async def test_a_create_cancelled_mid_way_leaves_no_sandbox(fake_vercel: FakeVercel) -> None:
    fake_vercel.create_delay = 1.5
    create = asyncio.ensure_future(on_fake(fake_vercel).create(SandboxSpec(name="c", mode="vm")))
    await asyncio.sleep(0.5)
    create.cancel()
    with pytest.raises(asyncio.CancelledError):
        await create
    assert fake_vercel.calls("DELETE", r"^/v2/sandboxes/")
    assert fake_vercel.sandboxes == {}
    assert fake_vercel.containers.leftovers() == []


@pytest.mark.docker
async def test_gc_finds_an_expired_leftover_by_its_tags(fake_vercel: FakeVercel) -> None:
    await gc_finds_an_expired_leftover(on_fake(fake_vercel), fake_settings(fake_vercel))
    assert fake_vercel.sandboxes == {}


@pytest.mark.docker
@pytest.mark.slow
def test_echo_mcp_deploys_answers_and_is_torn_down(
    fake_vercel: FakeVercel, capsys: pytest.CaptureFixture[str]
) -> None:
    run_echo_mcp("vercel", fake_settings(fake_vercel), capsys)
    assert fake_vercel.calls("DELETE", r"^/v2/sandboxes/")
    assert fake_vercel.sandboxes == {}
    assert fake_vercel.containers.leftovers() == []


def test_run_echo_mcp_without_credentials_fails_naming_them(tmp_path: Path) -> None:
    cli_without_credentials("vercel", tmp_path, env_prefixes=("VERCEL_",),
                            error="the vercel sandbox provider has no credentials")

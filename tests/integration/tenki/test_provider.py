"""The tenki provider's config errors, what it asks Tenki for, and Docker installed on first use.

Requests are the protobuf messages the real SDK handed its transport (:mod:`fake_tenki`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_tenki import API_KEY, DOCKER_SNAPSHOT, FakeTenkiRPC

from agent_env.api import ConfigError, SandboxSpec
from agent_env.runtime import Runtime
from agentenv_tenki.provider import TenkiSandbox, TenkiSandboxProvider

AGENT_ENV = str(Path(sys.executable).with_name("agent-env"))


def provider_from(settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {"tenki": {"config": settings}}})
    return runtime.provider("tenki")


def test_config_needs_an_api_key_and_at_most_one_of_snapshot_id_and_image() -> None:
    with pytest.raises(ConfigError, match=r"api_key.*\[sandbox.providers.tenki.config\]"):
        provider_from({"base_url": "https://tenki.example"})
    with pytest.raises(ConfigError, match=r"api_key = \"env:TENKI_API_KEY\""):
        provider_from({"api_key": ""})  # an env: reference to an empty variable
    with pytest.raises(ConfigError, match=r"both snapshot_id and image.*at most one"):
        provider_from({"api_key": "k", "snapshot_id": "s", "image": "i"})
    assert isinstance(provider_from({"api_key": "k", "image": "i"}), TenkiSandboxProvider)
    assert TenkiSandboxProvider.availability() is None


def test_an_unknown_key_is_refused_by_the_kernel_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as refused:
        provider_from({"api_key": "k", "snapshotid": "s"})
    assert refused.value.message == (
        "[sandbox.providers.tenki.config] has unknown setting(s) snapshotid for the 'tenki' "
        "sandbox provider (known: api_key, base_url, image, snapshot_id, workspace_id)"
    )
    with pytest.raises(ConfigError, match=r"unknown setting.*rpc"):  # a test hook, not a setting
        provider_from({"api_key": "k", "rpc": "x"})


@pytest.mark.docker
async def test_create_asks_for_resources_ttl_labels_env_and_the_snapshot(
    fake_tenki: FakeTenkiRPC,
) -> None:
    provider = TenkiSandboxProvider(api_key=API_KEY, snapshot_id=DOCKER_SNAPSHOT, rpc=fake_tenki)
    sandbox = await provider.create(SandboxSpec(
        name="env echo", mode="vm", cpu=1.5, memory_mb=2048, disk_mb=20480, ttl_seconds=600,
        env_vars={"A": "1"}, labels={"agentenv.run": "r1"}, network_policy="no-internet",
    ))
    try:
        [request] = fake_tenki.named("create_session")
        assert request.snapshot_id == DOCKER_SNAPSHOT and not request.registry_ref
        assert (request.cpu_cores, request.memory_mb, request.disk_size_gb) == (2, 2048, 20)
        assert request.max_duration.seconds == 600
        metadata = dict(request.metadata)
        owner = metadata.pop("agentenv.owner")  # who made it, so agent-env gc can judge it
        assert f"pid={os.getpid()} " in owner
        assert int(metadata.pop("agentenv.expires")) > time.time()
        from agent_env.sandbox.ownership import state_label

        assert metadata.pop("agentenv.state") == state_label()  # which root's gc judges it
        assert metadata == {"agentenv.run": "r1", "agentenv.mode": "vm"}
        assert dict(request.env) == {"A": "1"}
        assert request.allow_outbound is False
        assert request.name.startswith("agentenv-env-echo-")
        assert [s.id for s in await provider.list_sandboxes({"agentenv.run": "r1"})] == \
            [sandbox.id]
    finally:
        await sandbox.terminate()
    assert [r.session_id for r in fake_tenki.named("terminate_session")] == [sandbox.id]


@pytest.mark.docker
async def test_docker_is_installed_on_first_use_when_the_session_has_none(
    fake_tenki: FakeTenkiRPC, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fake's plain sessions keep a Docker CLI off PATH; "installing" links it, so the
    # test checks the decision and what follows, not apt-get.
    monkeypatch.setattr(TenkiSandbox, "install_docker_script",
                        "ln -s /opt/fake-tenki/docker /usr/local/bin/docker && docker info")
    provider = TenkiSandboxProvider(api_key=API_KEY, image="debian-docker-less", rpc=fake_tenki)
    sandbox = await provider.create(SandboxSpec(name="plain", mode="vm"))
    try:
        assert (await sandbox.exec("command -v docker")).exit_code != 0
        await sandbox.ensure_docker()
        await sandbox.ensure_docker()  # once is enough
        runs = [" ".join(r.cmd) for r in fake_tenki.named("run")]
        assert sum("ln -s /opt/fake-tenki/docker" in r for r in runs) == 1
        assert (await sandbox.exec("docker version --format ok")).exit_code == 0
        [request] = fake_tenki.named("create_session")
        assert request.registry_ref and not request.snapshot_id
    finally:
        await sandbox.terminate()


def test_the_plugin_is_listed_active() -> None:
    done = subprocess.run([AGENT_ENV, "plugin", "list"], capture_output=True, text=True,
                          timeout=60, env={**os.environ})
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if x.startswith("agentenv-framework-tenki ")]
    assert "1 sandbox provider" in line and line.rstrip().endswith("active")

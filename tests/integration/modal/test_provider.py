"""What the modal providers ask Modal for, their config errors, their faults, the CLI and
echo-mcp.

The requests are the ones the real SDK sent to the fake Modal (:mod:`fake_modal`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cloud_cases import cli_without_credentials, gc_finds_an_expired_leftover, run_echo_mcp
from fake_modal import BASE_IMAGE, FakeModal
from grpclib.const import Status

from agent_env.api import ConfigError, SandboxError, SandboxSpec, SandboxUnsupported
from agent_env.runtime import Runtime
from agentenv_modal.provider import (
    PUBLIC_PORTS,
    ModalSandboxProvider,
    ModalVmSandboxProvider,
)


def provider_from(name: str, settings: dict[str, object]) -> object:
    """The provider as a run gets it: the kernel checks the table, then calls from_config."""
    runtime = Runtime()
    runtime.configure(sandbox={"providers": {name: {"config": settings}}})
    return runtime.provider(name)


def on_fake(**settings: object) -> ModalSandboxProvider:
    return ModalSandboxProvider.from_config(**{"vm_image": BASE_IMAGE, **settings})


def test_the_reference_config_sections_are_accepted_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-1")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-1")
    modal = provider_from("modal", {"app_name": "evals", "gpu": "A10G",
                                    "ecr_pull_secret_name": "ecr-reader",
                                    "environment_name": "staging"})
    assert isinstance(modal, ModalSandboxProvider)
    assert (modal.app_name, modal.gpu, modal.environment_name) == ("evals", "A10G", "staging")
    assert modal.credentials == ("ak-1", "as-1")
    vm = provider_from("modal_vm", {"app_name": "evals", "environment_name": "staging"})
    assert isinstance(vm, ModalVmSandboxProvider) and vm.modes == ("vm",)
    with pytest.raises(ConfigError, match="needs token_id and token_secret together"):
        provider_from("modal", {"token_id": "ak-2"})
    assert ModalSandboxProvider.availability() is None


def test_no_credentials_anywhere_is_one_error_naming_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    for variable in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "none.toml"))
    with pytest.raises(ConfigError) as missing:
        provider_from("modal_vm", {})
    message = missing.value.message
    assert message.startswith("the modal_vm sandbox provider has no Modal credentials: set "
                              "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
    assert "[sandbox.providers.modal_vm.config]" in message and "\n" not in message
    # the SDK's own profile file is read as the SDK reads it
    (tmp_path / "modal.toml").write_text('[other]\ntoken_id = "x"\ntoken_secret = "y"\n'
                                         '[mine]\nactive = true\ntoken_id = "ak-p"\n'
                                         'token_secret = "as-p"\n')
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "modal.toml"))
    provider = provider_from("modal_vm", {})
    assert isinstance(provider, ModalVmSandboxProvider)
    assert provider.credentials == ("ak-p", "as-p")


@pytest.mark.docker
async def test_a_vm_sandbox_asks_for_the_vm_runtime_tunnels_size_tags_and_policy(
    fake_modal: FakeModal,
) -> None:
    sandbox = await on_fake(app_name="evals").create(SandboxSpec(
        name="env-echo", mode="vm", cpu=1.0, memory_mb=1024, ttl_seconds=900, ports=(9000,),
        env_vars={"A": "1"}, network_policy="no-internet",
        labels={"agentenv.run": "r1", "agentenv.step": "deploy"}))
    try:
        [app] = fake_modal.called("AppGetOrCreate")
        assert app.app_name == "evals"
        [image] = fake_modal.called("ImageGetOrCreate")
        assert list(image.image.dockerfile_commands) == [f"FROM {BASE_IMAGE}"]
        [create] = fake_modal.called("SandboxCreateV2")
        definition = create.definition
        assert dict(definition.experimental_options_v2) == {"vm_runtime": "True"}
        assert sorted(p.port for p in definition.open_ports.ports) == [*PUBLIC_PORTS, 9000]
        assert (definition.resources.milli_cpu, definition.resources.memory_mb) == (2000, 4096)
        assert definition.timeout_secs == 900 and not definition.block_network
        access = definition.network_access  # no-internet: an empty egress allowlist
        assert access.network_access_type == access.NetworkAccessType.ALLOWLIST
        assert (list(access.allowed_cidrs), list(access.allowed_domains)) == ([], [])
        tags = {t.tag_name: t.tag_value for t in create.tags}
        assert {k: tags[k] for k in ("agentenv.run", "agentenv.step", "agentenv.managed",
                                     "agentenv.mode")} == {
            "agentenv.run": "r1", "agentenv.step": "deploy", "agentenv.managed": "true",
            "agentenv.mode": "vm"}
        assert (await sandbox.exec("echo $A")).stdout == "1\n"
        assert sandbox.host_ports() == PUBLIC_PORTS
        url = await sandbox.expose(8001)
        assert url == f"http://8001-{sandbox.id}.localhost:{fake_modal.port}"
        with pytest.raises(SandboxUnsupported, match="no tunnel for port 8080"):
            await sandbox.expose(8080)
    finally:
        await sandbox.terminate()
    assert fake_modal.called("SandboxTerminateV2")
    assert fake_modal.running() == []


@pytest.mark.docker
async def test_a_container_sandbox_boots_its_image_and_the_default_vm_image_has_docker(
    fake_modal: FakeModal,
) -> None:
    spec = SandboxSpec(name="tool", mode="container", image=BASE_IMAGE, ports=(9000,))
    sandbox = await on_fake().create(spec)
    try:
        [create] = fake_modal.called("SandboxCreateV2")
        assert not create.definition.experimental_options_v2
        assert [p.port for p in create.definition.open_ports.ports] == [9000]
        assert (await sandbox.exec("python3 -c 'print(6 * 7)'")).stdout == "42\n"
        with pytest.raises(SandboxUnsupported, match="runs no Docker"):
            await sandbox.start_docker()
    finally:
        await sandbox.terminate()
    # unset, vm_image is Ubuntu with Docker installed on top, built by Modal; the fake has
    # no ubuntu:22.04 to pull, and that refusal is one error naming the image
    with pytest.raises(SandboxError) as refused:
        await ModalSandboxProvider.from_config().create(SandboxSpec(name="d", mode="vm"))
    [_, image] = fake_modal.called("ImageGetOrCreate")
    assert list(image.image.dockerfile_commands) == ["FROM ubuntu:22.04"]
    assert "image ubuntu:22.04 not found in its registry" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert fake_modal.running() == []


@pytest.mark.docker
async def test_a_gpu_sandbox_takes_the_sdks_v1_path_env_and_commands_included(
    fake_modal: FakeModal,
) -> None:
    provider = on_fake(gpu="A10G:2")
    sandbox = await provider.create(SandboxSpec(
        name="trainer", mode="container", image=BASE_IMAGE, env_vars={"SEED": "7"},
        labels={"agentenv.run": "gpu-run"}))
    try:
        assert not fake_modal.called("SandboxCreateV2")  # a GPU is V1's, in SDK 1.6
        [create] = fake_modal.called("SandboxCreate")
        gpu = create.definition.resources.gpu_config
        assert (gpu.gpu_type, gpu.count) == ("A10G", 2)
        assert fake_modal.called("SecretGetOrCreate")  # V1 sends env as a secret
        assert (await sandbox.exec("echo $SEED")).stdout == "7\n"
        await sandbox.put_file("/tmp/data/x.bin", b"\x00\x01")
        assert await sandbox.get_file("/tmp/data/x.bin") == b"\x00\x01"
        assert (await provider.attach(sandbox.id)) is not None
        assert [s.id for s in await provider.list_sandboxes({"agentenv.run": "gpu-run"})] == \
            [sandbox.id]
    finally:
        await sandbox.terminate()
    assert fake_modal.called("SandboxTerminate") and fake_modal.running() == []
    assert await provider.attach(sandbox.id) is None


@pytest.mark.docker
async def test_quota_is_retried_and_refused_credentials_are_one_error(
    fake_modal: FakeModal,
) -> None:
    fake_modal.create_faults = [Status.RESOURCE_EXHAUSTED]
    sandbox = await on_fake().create(SandboxSpec(name="r", mode="vm"))
    await sandbox.terminate()
    assert len(fake_modal.called("SandboxCreateV2")) == 2
    with pytest.raises(SandboxError) as refused:
        await on_fake(token_id="ak-wrong", token_secret="as-wrong").create(
            SandboxSpec(name="f", mode="vm"))
    assert str(refused.value).startswith("Modal refused the credentials: check token_id and "
                                         "token_secret in [sandbox.providers.modal.config]")
    with pytest.raises(SandboxError, match="image no-such/image:1 not found"):
        await on_fake().create(SandboxSpec(name="i", mode="container",
                                           image="no-such/image:1"))
    assert fake_modal.running() == []


@pytest.mark.docker
async def test_a_create_the_api_fails_after_making_leaves_nothing_running(
    fake_modal: FakeModal,
) -> None:
    # INTERNAL is retried by the SDK itself: every try makes a sandbox, none is answered
    fake_modal.fail_after_make = [Status.INTERNAL] * 10
    with pytest.raises(SandboxError, match="Modal could not create a sandbox: InternalError"):
        await on_fake().create(SandboxSpec(name="m", mode="vm"))
    assert len(fake_modal.sandboxes) > 1  # the SDK's retries each made one
    assert fake_modal.running() == []
    assert fake_modal.containers.leftovers() == []


@pytest.mark.docker
async def test_a_sandbox_ended_by_modal_mid_run_is_minus_one_then_gone(
    fake_modal: FakeModal,
) -> None:
    provider = on_fake()
    sandbox = await provider.create(SandboxSpec(name="v", mode="vm"))
    fake_modal.vanish(sandbox.id)
    result = await sandbox.exec("echo still here")
    assert result.exit_code == -1 and f"lost modal sandbox {sandbox.id}" in result.stderr
    await sandbox.terminate()  # already ended: no error
    assert await provider.attach(sandbox.id) is None


@pytest.mark.docker
async def test_a_create_cancelled_mid_way_leaves_no_sandbox(fake_modal: FakeModal) -> None:
    fake_modal.create_delay = 1.5
    create = asyncio.ensure_future(on_fake().create(SandboxSpec(name="c", mode="vm")))
    # cancelled once the API has the create (a fixed 0.5 s was before it, on a loaded CI)
    for _ in range(200):
        if fake_modal.called("SandboxCreateV2"):
            break
        await asyncio.sleep(0.05)
    assert fake_modal.called("SandboxCreateV2"), "the create never reached the API"
    create.cancel()
    with pytest.raises(asyncio.CancelledError):
        await create
    assert fake_modal.called("SandboxTerminateV2")
    assert fake_modal.running() == []
    assert fake_modal.containers.leftovers() == []


@pytest.mark.docker
async def test_gc_finds_an_expired_leftover_by_its_tags(fake_modal: FakeModal) -> None:
    await gc_finds_an_expired_leftover(on_fake(), {"vm_image": BASE_IMAGE})
    assert fake_modal.running() == []


@pytest.mark.docker
@pytest.mark.slow
def test_echo_mcp_deploys_answers_and_is_torn_down(
    fake_modal: FakeModal, capsys: pytest.CaptureFixture[str]
) -> None:
    run_echo_mcp("modal_vm", {"vm_image": BASE_IMAGE}, capsys)
    assert fake_modal.called("SandboxTerminateV2")
    assert fake_modal.running() == []
    assert fake_modal.containers.leftovers() == []


def test_run_echo_mcp_without_credentials_fails_naming_them(tmp_path: Path) -> None:
    cli_without_credentials(
        "modal", tmp_path, env_prefixes=("MODAL_",),
        error="the modal sandbox provider has no Modal credentials",
        extra_env={"MODAL_CONFIG_PATH": str(tmp_path / "no-modal.toml")})

"""Conformance suite for sandbox providers (:mod:`agent_env.sandbox.base`).

Subclass :class:`ProviderConformance`, give it a ``provider`` fixture (a
:class:`~agent_env.sandbox.base.SandboxProvider`) and set the capability flags to what the
provider can do; every test then runs against it::

    class TestMyProvider(ProviderConformance):
        EXPOSES_UNLISTED_PORTS = True

        @pytest.fixture
        def provider(self):
            return MyProvider(api_key="...")

What it checks, per mode the provider supports: create with cpu, memory, disk, TTL, env vars
and ports; ``exec`` (exit code, stdout, stderr; ``-1`` when the transport is lost, never an
exception); copying files in and out; a port served inside the sandbox reached from the host
through ``expose``; ``terminate`` idempotent; ``attach`` from the id alone (through a provider
rebuilt with :meth:`ProviderConformance.reopen`); and refusals with
:class:`~agent_env.sandbox.base.SandboxUnsupported` naming what cannot be done (a network
policy, a mode, an unlisted port, containers where the sandbox cannot run them). VM-like
sandboxes that run containers also build an image and serve a port from a container.

Why a class and flags rather than one test per provider: the contract is what ``deploy_env``
relies on, so every provider must be held to the same list; the flags only say which optional
parts apply, so a provider never skips a test it should pass. A test that does not apply (a
mode the provider lacks, containers it does not run) is reported skipped with the reason, never
as passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent_env.sandbox.base import (
    ContainerSpec,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
    SandboxUnsupported,
)

__all__ = ["ProviderConformance", "fetch_url", "free_port"]

#: A policy no provider enforces, to check the refusal.
UNKNOWN_POLICY = "agentenv-conformance-unenforceable"
RUN_LABEL = "agentenv.run"


def free_port() -> int:
    """A TCP port free on this host right now (providers that share the host's ports need it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def fetch_url(url: str, *, timeout: float = 30.0) -> tuple[int, bytes]:
    """GET ``url`` until it answers (a server just started may need a moment).

    Connection errors and 5xx answers are retried until ``timeout``; then the error is
    raised, or the 5xx answer returned.
    """

    def get() -> tuple[int, bytes]:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read()

    deadline = time.monotonic() + timeout
    while True:
        try:
            return await asyncio.to_thread(get)
        except urllib.error.HTTPError as exc:
            # a proxy in front of a server still starting answers 502/503: wait for it
            if exc.code < 500 or time.monotonic() > deadline:
                return int(exc.code), exc.read()
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


class ProviderConformance:
    """The behaviour every sandbox provider must have (see :mod:`agent_env.sandbox.base`)."""

    #: The provider class under test (its ``modes`` are the modes tested unless MODES says).
    PROVIDER_CLASS: ClassVar[type[SandboxProvider] | None] = None
    #: Modes to test; default: every mode PROVIDER_CLASS declares.
    MODES: ClassVar[tuple[str, ...] | None] = None
    #: The image sandboxes are created from (it needs ``sh`` and ``python3``).
    IMAGE: ClassVar[str | None] = None
    #: A folder every sandbox may write to (the local provider allows only ``/app``).
    WORK_DIR: ClassVar[str] = "/app"
    #: ``expose`` works for ports not named in ``SandboxSpec.ports``.
    EXPOSES_UNLISTED_PORTS: ClassVar[bool] = False
    #: ``mode="vm"`` sandboxes build images and run containers (what ``deploy_env`` needs).
    RUNS_CONTAINERS: ClassVar[bool] = True
    #: ``list_sandboxes(labels)`` finds the provider's sandboxes by label.
    LISTS_SANDBOXES: ClassVar[bool] = True
    #: Network policies the provider enforces (others must be refused).
    NETWORK_POLICIES: ClassVar[tuple[str, ...]] = ()
    #: The base image a test Dockerfile starts from (VM-like sandboxes that run containers).
    CONTAINER_BASE_IMAGE: ClassVar[str] = "python:3.11-slim"
    #: Seconds a served port may take to answer.
    SERVE_TIMEOUT: ClassVar[float] = 30.0

    # -- hooks a subclass may override ----------------------------------------------------

    @pytest.fixture
    def provider(self) -> SandboxProvider:
        raise NotImplementedError("a provider conformance class must define a provider fixture")

    def reopen(self, provider: SandboxProvider) -> SandboxProvider:
        """A provider as a fresh process would build it (for ``attach`` after a crash)."""
        return provider

    async def lose_transport(self, sandbox: Sandbox) -> None:
        """Cut the connection to ``sandbox``; by default the sandbox goes away under it."""
        await sandbox.terminate()

    def sandbox_port(self) -> int:
        """A port to serve on inside a sandbox (a free host port: some providers share it)."""
        return free_port()

    # -- parametrization and fixtures -----------------------------------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "mode" in metafunc.fixturenames:
            metafunc.parametrize("mode", list(self.modes_under_test()))

    def modes_under_test(self) -> tuple[str, ...]:
        if self.MODES is not None:
            return self.MODES
        if self.PROVIDER_CLASS is not None:
            return tuple(self.PROVIDER_CLASS.modes)
        return ("vm", "container")

    @pytest.fixture
    def run_label(self) -> str:
        return f"conformance-{uuid.uuid4().hex[:10]}"

    @pytest.fixture
    async def made(self, provider: SandboxProvider) -> AsyncIterator[list[Sandbox]]:
        """Sandboxes a test created; each is terminated afterwards, whatever happened."""
        sandboxes: list[Sandbox] = []
        yield sandboxes
        for sandbox in sandboxes:
            with contextlib.suppress(Exception):
                await sandbox.terminate()

    def spec(self, mode: str, run_label: str, **changes: Any) -> SandboxSpec:
        values: dict[str, Any] = {
            "name": f"conformance-{mode}", "mode": mode, "image": self.IMAGE,
            "labels": {RUN_LABEL: run_label, "agentenv.conformance": "yes"},
        }
        values.update(changes)
        return SandboxSpec(**values)

    async def create(
        self, provider: SandboxProvider, made: list[Sandbox], spec: SandboxSpec
    ) -> Sandbox:
        sandbox = await provider.create(spec)
        made.append(sandbox)
        return sandbox

    def path(self, *parts: str) -> str:
        return "/".join([self.WORK_DIR.rstrip("/"), *parts])

    # -- create ---------------------------------------------------------------------------

    async def test_create_with_resources_env_and_ports(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        port = self.sandbox_port()
        spec = self.spec(mode, run_label, cpu=1.0, memory_mb=1024, disk_mb=4096,
                         ttl_seconds=900, ports=(port,),
                         env_vars={"AGENTENV_CONFORMANCE": "from-spec"})
        sandbox = await self.create(provider, made, spec)
        assert isinstance(sandbox.id, str) and sandbox.id
        assert sandbox.provider_name == provider.name
        described = sandbox.describe()
        assert described["id"] == sandbox.id
        assert described["provider"] == provider.name
        result = await sandbox.exec("echo $AGENTENV_CONFORMANCE")
        assert (result.exit_code, result.stdout.strip()) == (0, "from-spec"), result

    # -- exec -----------------------------------------------------------------------------

    async def test_exec_reports_exit_code_stdout_and_stderr(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        result = await sandbox.exec("echo out; echo err >&2; exit 3")
        assert result.exit_code == 3
        assert result.stdout == "out\n"
        assert result.stderr == "err\n"
        assert not result.ok
        ok = await sandbox.exec(["sh", "-c", "printf '%s' \"$1\"", "sh", "an argv, spaces kept"])
        assert (ok.exit_code, ok.stdout) == (0, "an argv, spaces kept"), ok
        assert ok.ok

    async def test_exec_takes_cwd_and_env(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        await sandbox.put_file(self.path("cwd", "marker.txt"), b"here")
        result = await sandbox.exec("cat marker.txt && printf ' %s' \"$CONFORMANCE_VAR\"",
                                    cwd=self.path("cwd"), env={"CONFORMANCE_VAR": "set"})
        assert (result.exit_code, result.stdout) == (0, "here set"), result

    async def test_exec_on_a_lost_transport_returns_minus_one(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        assert (await sandbox.exec("true")).exit_code == 0
        await self.lose_transport(sandbox)
        result = await sandbox.exec("echo still here")
        assert result.exit_code == -1, result
        assert "still here" not in result.stdout

    # -- files ----------------------------------------------------------------------------

    async def test_files_copy_in_and_out(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        data = bytes(range(256)) * 64 + "é\n".encode()
        path = self.path("copied", "deep", "blob.bin")
        await sandbox.put_file(path, data)  # parent folders are created
        assert await sandbox.get_file(path) == data
        size = await sandbox.exec(f"wc -c < {path}")
        assert (size.exit_code, size.stdout.strip()) == (0, str(len(data))), size
        await sandbox.put_file(path, b"replaced")
        assert await sandbox.get_file(path) == b"replaced"
        script = self.path("copied", "run.sh")
        await sandbox.put_file(script, b"#!/bin/sh\necho ran\n", mode=0o755)
        ran = await sandbox.exec(script)
        assert (ran.exit_code, ran.stdout) == (0, "ran\n"), ran
        made_inside = self.path("copied", "from-exec.txt")
        wrote = await sandbox.exec(f"printf 'written inside' > {made_inside}")
        assert wrote.exit_code == 0, wrote
        assert await sandbox.get_file(made_inside) == b"written inside"

    async def test_get_file_of_a_missing_path_raises_file_not_found(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        with pytest.raises(FileNotFoundError):
            await sandbox.get_file(self.path("no", "such", "file.txt"))

    # -- ports ----------------------------------------------------------------------------

    async def test_a_listed_port_is_exposed_as_a_url(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        port = self.sandbox_port()
        sandbox = await self.create(provider, made, self.spec(mode, run_label, ports=(port,)))
        marker = uuid.uuid4().hex
        await sandbox.put_file(self.path("www", "index.html"), marker.encode())
        pid = await self.serve(sandbox, port, self.path("www"))
        try:
            url = await sandbox.expose(port)
            assert url.startswith(("http://", "https://")), url
            status, body = await fetch_url(url.rstrip("/") + "/index.html",
                                           timeout=self.SERVE_TIMEOUT)
            assert (status, body.decode()) == (200, marker)
        finally:
            await sandbox.exec(f"kill {pid}")

    async def test_an_unlisted_port_is_exposed_or_refused_clearly(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        port = self.sandbox_port()
        if self.EXPOSES_UNLISTED_PORTS:
            url = await sandbox.expose(port)
            assert url.startswith(("http://", "https://")), url
        else:
            with pytest.raises(SandboxUnsupported, match=str(port)):
                await sandbox.expose(port)

    async def serve(self, sandbox: Sandbox, port: int, folder: str) -> str:
        """Start a static HTTP server on ``port`` in the background; returns its pid."""
        started = await sandbox.exec(
            f"nohup python3 -m http.server {port} --bind 0.0.0.0 --directory {folder} "
            ">/dev/null 2>&1 & echo $!"
        )
        assert started.exit_code == 0, started
        return started.stdout.strip()

    # -- terminate and attach -------------------------------------------------------------

    async def test_terminate_is_idempotent(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        other_handle = await self.reopen(provider).attach(sandbox.id)
        assert other_handle is not None
        await sandbox.terminate()
        await sandbox.terminate()
        await other_handle.terminate()  # gone already: still no error
        assert await self.reopen(provider).attach(sandbox.id) is None

    async def test_attach_finds_a_sandbox_from_its_id_alone(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        await sandbox.put_file(self.path("kept.txt"), b"kept")
        found = await self.reopen(provider).attach(sandbox.id)
        assert found is not None
        assert found.id == sandbox.id
        assert found.provider_name == provider.name
        assert await found.get_file(self.path("kept.txt")) == b"kept"
        result = await found.exec(f"cat {self.path('kept.txt')}")
        assert (result.exit_code, result.stdout) == (0, "kept"), result

    async def test_attach_of_an_unknown_id_is_none(self, provider: SandboxProvider) -> None:
        assert await self.reopen(provider).attach(f"missing-{uuid.uuid4().hex[:12]}") is None

    async def test_list_sandboxes_finds_them_by_label(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        found = await self.reopen(provider).list_sandboxes({RUN_LABEL: run_label})
        if not self.LISTS_SANDBOXES:
            assert found == []
            return
        assert [s.id for s in found] == [sandbox.id]
        assert await provider.list_sandboxes({RUN_LABEL: f"{run_label}-other"}) == []

    # -- refusals -------------------------------------------------------------------------

    async def test_an_unenforceable_network_policy_is_refused_before_creating(
        self, provider: SandboxProvider, made: list[Sandbox], run_label: str
    ) -> None:
        mode = self.modes_under_test()[0]
        spec = self.spec(mode, run_label, network_policy=UNKNOWN_POLICY)
        with pytest.raises(SandboxUnsupported) as refused:
            await self.create(provider, made, spec)
        assert UNKNOWN_POLICY in refused.value.message
        assert provider.name in refused.value.message
        if self.LISTS_SANDBOXES:
            assert await provider.list_sandboxes({RUN_LABEL: run_label}) == []

    async def test_unsupported_modes_are_refused_naming_the_mode(
        self, provider: SandboxProvider, made: list[Sandbox], run_label: str
    ) -> None:
        unsupported = [mode for mode in ("vm", "container") if mode not in provider.modes]
        if not unsupported:
            pytest.skip(f"{provider.name} supports every mode (vm, container): none to refuse")
        for mode in unsupported:
            with pytest.raises(SandboxUnsupported, match=mode):
                await self.create(provider, made, self.spec(mode, run_label))

    async def test_containers_are_refused_where_the_sandbox_cannot_run_them(
        self, provider: SandboxProvider, made: list[Sandbox], mode: str, run_label: str
    ) -> None:
        if mode == "vm" and self.RUNS_CONTAINERS:
            pytest.skip(f"{provider.name} vm sandboxes run containers (RUNS_CONTAINERS): "
                        "test_vm_sandboxes_build_images_and_run_containers checks them")
        sandbox = await self.create(provider, made, self.spec(mode, run_label))
        with pytest.raises(SandboxUnsupported, match=provider.name):
            await sandbox.run_container(ContainerSpec(name="web", image="any:latest"))

    # -- containers in VM-like sandboxes --------------------------------------------------

    async def test_vm_sandboxes_build_images_and_run_containers(
        self, provider: SandboxProvider, made: list[Sandbox], run_label: str, tmp_path: Path
    ) -> None:
        if "vm" not in self.modes_under_test():
            pytest.skip(f"{provider.name} has no vm mode under test "
                        f"(modes: {', '.join(self.modes_under_test())})")
        if not self.RUNS_CONTAINERS:
            pytest.skip(f"{provider.name} vm sandboxes run no containers (RUNS_CONTAINERS = "
                        "False): test_containers_are_refused_where_the_sandbox_cannot_run_them "
                        "checks the refusal")
        sandbox = await self.create(provider, made, self.spec("vm", run_label))
        port = 8080
        marker = hashlib.sha256(run_label.encode()).hexdigest()[:16]
        context = tmp_path / "conformance-web"  # its own folder: tmp_path may hold state
        (context / "www").mkdir(parents=True)
        (context / "www" / "index.html").write_text(marker, encoding="utf-8")
        (context / "Dockerfile").write_text(
            f"FROM {self.CONTAINER_BASE_IMAGE}\nCOPY www /www\n"
            f'CMD ["python3", "-m", "http.server", "{port}", "--directory", "/www"]\n',
            encoding="utf-8",
        )
        ref = await sandbox.build_image(str(context), "conformance-web",
                                        labels={RUN_LABEL: run_label})
        assert ref
        again = await sandbox.build_image(str(context), "conformance-web",
                                          labels={RUN_LABEL: run_label})
        assert again == ref, (ref, again)  # same sources, same ref
        urls = await sandbox.run_container(ContainerSpec(
            name="web", image=ref, publish=(port,), labels={RUN_LABEL: run_label},
        ))
        assert set(urls) == {port}
        status, body = await fetch_url(urls[port].rstrip("/") + "/index.html",
                                       timeout=self.SERVE_TIMEOUT)
        assert (status, body.decode()) == (200, marker)
        assert isinstance(await sandbox.container_logs("web"), str)
        await sandbox.terminate()
        with contextlib.suppress(OSError, urllib.error.URLError):  # refused: gone, as it should
            status, body = await fetch_url(urls[port].rstrip("/") + "/index.html", timeout=0)
            assert (status, body.decode()) != (200, marker), "the container outlived terminate"

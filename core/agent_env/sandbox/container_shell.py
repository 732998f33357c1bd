"""A container inside a VM-like sandbox, seen as a sandbox: what a step's ``container_name``
works on.

Why: ``load_artifact``, ``collect_artifacts`` and ``run_container_unit_tests_verifier`` are
written against :class:`~agent_env.sandbox.base.Sandbox` (``exec``, ``put_file``,
``get_file``). A task that started its own container (``run_docker_container``) names it with
``container_name``, and these steps then work inside that container instead, through the
sandbox's ``container_exec``, ``put_container_file`` and ``get_container_file``, unchanged.
"""

from __future__ import annotations

import posixpath

from agent_env.sandbox.base import ExecResult, Sandbox, SandboxUnsupported


class ContainerShell(Sandbox):
    """Container ``name`` of ``sandbox``; commands run as ``user`` (default: the image's)."""

    def __init__(self, sandbox: Sandbox, name: str, user: str | None = None,
                 workdir: str = "/") -> None:
        self.sandbox, self.name, self.user, self.workdir = sandbox, name, user, workdir
        self.id = f"{sandbox.id}/{name}"
        self.provider_name = sandbox.provider_name

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, path))

    async def exec(self, command: str | list[str], *, cwd: str | None = None,
                   env: dict[str, str] | None = None,
                   timeout: float | None = None) -> ExecResult:
        return await self.sandbox.container_exec(self.name, command, cwd=cwd, env=env,
                                                 timeout=timeout, user=self.user)

    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        await self.sandbox.put_container_file(self.name, self._path(path), data, mode=mode)

    async def get_file(self, path: str) -> bytes:
        return await self.sandbox.get_container_file(self.name, self._path(path))

    async def expose(self, port: int) -> str:
        raise SandboxUnsupported(f"container {self.name}: publish its ports with "
                                 "run_docker_container's ports")

    async def terminate(self) -> None:
        """Nothing: the container goes with its sandbox."""

    def describe(self) -> dict[str, object]:
        return {**self.sandbox.describe(), "container": self.name}

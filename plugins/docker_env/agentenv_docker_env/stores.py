"""Image stores on this machine: the local engine itself, and a loopback OCI registry.

``local`` (the default ``[stores] image``) keeps images in the local Docker engine: a ref is
just ``repo:tag`` and "pushing" is tagging. ``local_registry`` is a real registry API on
127.0.0.1, for flows that need push and pull (another engine, a microVM's daemon, tests of
registry-backed stores): Debian's ``docker-registry`` (distribution 2.8) started on demand as a
detached host process, with its data under the state root so images survive restarts. Docker
trusts loopback registries without TLS, so no certificates are involved.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from agent_env.api import ImageStore, RegistryAuth, SandboxError, UserError, current
from agentenv_docker_env.engine import docker_client

LOOPBACK = "127.0.0.1"


def _split_ref(ref: str) -> tuple[str, str]:
    """``repo:tag`` -> (repo, tag); a colon in a registry host is not a tag."""
    head, _, last = ref.rpartition("/")
    if ":" in last:
        name, tag = last.rsplit(":", 1)
        return (f"{head}/{name}" if head else name), tag
    return ref, "latest"


def _has_registry_host(ref: str) -> bool:
    first, _, rest = ref.partition("/")
    return bool(rest) and ("." in first or ":" in first or first == "localhost")


class LocalImageStore(ImageStore):
    """Images kept in the local engine: refs are ``[prefix/]repo:tag``, push is a tag."""

    def __init__(self, *, prefix: str = "", base_url: str | None = None) -> None:
        self.prefix = prefix.strip("/")
        self.base_url = base_url

    def image_ref(self, repo: str, tag: str) -> str:
        return f"{self.prefix}/{repo}:{tag}" if self.prefix else f"{repo}:{tag}"

    def ensure_repository(self, repo: str) -> None:
        """Nothing to create: the engine makes repositories as images are tagged."""

    def owns(self, ref: str) -> bool:
        return not _has_registry_host(ref)

    def auth(self, ref: str) -> RegistryAuth | None:
        return None

    def push(self, image: str, repo: str, tag: str) -> str:
        """Make ``image`` (a ref or id) available as ``image_ref(repo, tag)``."""
        ref = self.image_ref(repo, tag)
        target_repo, target_tag = _split_ref(ref)
        docker_client(self.base_url).images.get(image).tag(target_repo, target_tag)
        return ref

    def pull(self, ref: str) -> str:
        """The image id of ``ref``, which must already be in the engine."""
        import docker.errors

        try:
            return docker_client(self.base_url).images.get(ref).id
        except docker.errors.ImageNotFound:
            raise SandboxError(f"image {ref} is not in the local Docker engine") from None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/v2/", timeout=1) as response:
            return response.status == 200
    except Exception:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):  # a zombie child of ours counts as dead
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False
    return True


class LocalRegistryImageStore(ImageStore):
    """A loopback OCI registry (``docker-registry serve``) started the first time it is used."""

    def __init__(
        self,
        *,
        root: str | Path | None = None,
        port: int | None = None,
        binary: str = "docker-registry",
        base_url: str | None = None,
        start_timeout: float = 15.0,
    ) -> None:
        if root is None:
            root = current().config.state_root / "docker_env" / "registry"
        self.root = Path(root)
        self.wanted_port = port
        self.binary = binary
        self.base_url = base_url
        self.start_timeout = start_timeout
        self._port: int | None = None

    # -- the registry process ---------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.root / "registry.json"

    def _state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    @property
    def registry(self) -> str:
        """``127.0.0.1:PORT`` of the running registry (started when needed)."""
        return f"{LOOPBACK}:{self.start()}"

    def start(self) -> int:
        """Start the registry unless one of ours already answers; returns its port."""
        if self._port is not None and _answers(self._port):
            return self._port
        state = self._state()
        pid, port = state.get("pid"), state.get("port")
        if pid and port and _alive(int(pid)) and _answers(int(port)):
            self._port = int(port)
            return self._port
        executable = shutil.which(self.binary)
        if executable is None:
            raise UserError(
                f"the local registry needs `{self.binary}`, which is not installed",
                notes=["install it with `apt-get install docker-registry` (or bash .ci/docker.sh)"],
            )
        port = self.wanted_port or (port if port and _port_free(int(port)) else _free_port())
        self.root.mkdir(parents=True, exist_ok=True)
        data = self.root / "data"
        data.mkdir(exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: warn\n"
            f"storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {LOOPBACK}:{port}\n"
        )
        log = self.root / "registry.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [executable, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,  # outlives this process
            )
        self.state_file.write_text(json.dumps({"pid": process.pid, "port": port}))
        deadline = time.monotonic() + self.start_timeout
        while not _answers(int(port)):
            if process.poll() is not None or time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    process.kill()
                tail = log.read_text(errors="replace").splitlines()[-10:]
                raise SandboxError(
                    f"the local registry did not answer on {LOOPBACK}:{port}: "
                    + (" | ".join(tail) or "no output")
                )
            time.sleep(0.1)
        self._port = int(port)
        return self._port

    def stop(self) -> None:
        """Stop the registry process this store started (its data stays)."""
        pid = self._state().get("pid")
        if pid and _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGTERM)
            for _ in range(50):
                if not _alive(int(pid)):
                    break
                time.sleep(0.1)
        self.state_file.unlink(missing_ok=True)
        self._port = None

    # -- the ImageStore contract ------------------------------------------------------------

    def image_ref(self, repo: str, tag: str) -> str:
        return f"{self.registry}/{repo}:{tag}"

    def ensure_repository(self, repo: str) -> None:
        """Repositories appear on first push; only make sure the registry runs."""
        self.start()

    def owns(self, ref: str) -> bool:
        port = self._port or self._state().get("port") or self.wanted_port
        return port is not None and ref.startswith(f"{LOOPBACK}:{port}/")

    def auth(self, ref: str) -> RegistryAuth | None:
        return None

    def push(self, image: str, repo: str, tag: str) -> str:
        """Tag ``image`` (a local ref or id) into the registry and push it; returns the ref."""
        client = docker_client(self.base_url)
        ref = self.image_ref(repo, tag)
        target_repo, target_tag = _split_ref(ref)
        client.images.get(image).tag(target_repo, target_tag)
        for chunk in client.api.push(target_repo, tag=target_tag, stream=True, decode=True):
            if "error" in chunk:
                raise SandboxError(f"pushing {ref} failed: {chunk['error']}")
        return ref

    def pull(self, ref: str) -> str:
        """Pull ``ref`` from the registry into the local engine; returns the image id."""
        import docker.errors

        self.start()
        repo, tag = _split_ref(ref)
        try:
            return docker_client(self.base_url).images.pull(repo, tag=tag).id
        except docker.errors.APIError as exc:
            raise SandboxError(f"pulling {ref} failed: {exc.explanation or exc}") from None

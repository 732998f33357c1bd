"""What every fake cloud sandbox service in these tests shares: real containers as sandboxes.

A fake vendor API (Daytona's, E2B's, ...) answers its SDK over HTTP; the sandboxes behind it
are containers on the local Docker engine, so exec, copies and ports really happen. Host
networking makes a sandbox port that port on 127.0.0.1; a sandbox that should run Docker gets
the host's socket and CLI mounted in, standing in for the Docker daemon of a VM-like sandbox.
Each container carries ``<fake label>=<sandbox id>`` and ``agentenv.sandbox=<id>``, so removing
a sandbox also removes what its "daemon" ran.

:class:`FakeCloudServer` is the aiohttp side: it records every request (header names
lowercased), serves the app from its own thread and event loop (the SDK under test runs on
the test's), and proxies public port URLs
(``Host: <port>-<id>.localhost:<port of the fake>``; tests resolve ``*.localhost`` locally).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
import tarfile
import threading
import time
from typing import Any

import aiohttp
from aiohttp import web

KEEP_ALIVE = ["/bin/sh", "-c", "while :; do sleep 3600; done"]
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}
INGRESS_HOST = re.compile(r"^(?P<port>\d+)-(?P<id>[^.]+)\.localhost(?::\d+)?$")


class SandboxContainers:
    """Starts and removes the containers that stand in for sandboxes."""

    def __init__(self, docker_client: Any, fake_label: str) -> None:
        self.docker = docker_client
        self.fake_label = fake_label

    def start(self, sandbox_id: str, image: str, *, with_docker: bool,
              env: dict[str, str] | None = None) -> Any:
        volumes: dict[str, dict[str, str]] = {}
        docker_cli = shutil.which("docker")
        if with_docker and docker_cli:
            volumes["/var/run/docker.sock"] = {"bind": "/var/run/docker.sock", "mode": "rw"}
            volumes[docker_cli] = {"bind": "/usr/local/bin/docker", "mode": "ro"}
        return self.docker.containers.run(
            image, KEEP_ALIVE, detach=True, name=f"{self.fake_label.replace('.', '-')}-"
            f"{sandbox_id}", network_mode="host", volumes=volumes, environment=env or {},
            labels={self.fake_label: sandbox_id, "agentenv.sandbox": sandbox_id},
        )

    def remove(self, sandbox_id: str) -> None:
        """The sandbox's container and whatever its Docker daemon ran (they share ours)."""
        label = {"label": f"agentenv.sandbox={sandbox_id}"}
        for container in self.docker.containers.list(all=True, filters=label):
            container.remove(force=True)
        for network in self.docker.networks.list(filters=label):
            network.remove()

    def leftovers(self) -> list[Any]:
        return self.docker.containers.list(all=True, filters={"label": self.fake_label})


def put_file(container: Any, path: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``path`` (parents made) in ``container``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    container.put_archive("/", buffer.getvalue())


def get_file(container: Any, path: str) -> bytes | None:
    """The bytes of ``path`` in ``container``; None when there is no such file."""
    import docker.errors

    try:
        chunks, _ = container.get_archive(path)
    except docker.errors.NotFound:
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
        member = tar.next()
        handle = tar.extractfile(member) if member is not None else None
        return handle.read() if handle is not None else None


def json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


class FakeCloudServer:
    """An aiohttp app on 127.0.0.1 in a thread of its own, with a request log and ingress.

    A subclass implements :meth:`handle` (the vendor's API) and :meth:`ingress_open` (whether
    a sandbox's port is public).
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def calls(self, method: str, path_pattern: str) -> list[dict[str, Any]]:
        return [r for r in self.requests
                if r["method"] == method and re.search(path_pattern, r["path"])]

    # -- serving ---------------------------------------------------------------------------

    def start(self) -> str:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(30)
        return self.url

    def stop(self) -> None:
        assert self._loop is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(120)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self) -> None:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _shutdown(self) -> None:
        await self.close()
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def close(self) -> None:
        """Remove every sandbox still up (the subclass knows them)."""

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        host = request.headers.get("Host", "")
        ingress = INGRESS_HOST.match(host)
        if ingress:
            return await self._ingress(request, ingress["id"], int(ingress["port"]))
        body = await request.read()
        self.requests.append({
            "method": request.method, "path": request.path, "query": dict(request.query),
            "host": host, "headers": {k.lower(): v for k, v in request.headers.items()},
            "json": json_or_none(body),
            "size": len(body),
        })
        return await self.handle(request, body)

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        raise NotImplementedError

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        raise NotImplementedError

    async def _ingress(self, request: web.Request, sandbox_id: str, port: int,
                       path_qs: str | None = None) -> web.StreamResponse:
        """Proxy ``request`` to ``port`` (to ``path_qs`` there, for services that route by
        path rather than by host)."""
        if not self.ingress_open(sandbox_id, port):
            return web.Response(status=404, text=f"port {port} of {sandbox_id} is not public")
        if self._http is None:
            self._http = aiohttp.ClientSession(auto_decompress=False)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        try:
            upstream = await self._http.request(
                request.method, f"http://127.0.0.1:{port}{path_qs or request.path_qs}",
                headers=headers,
                data=await request.read(), allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            )
        except aiohttp.ClientError:
            return web.Response(status=502, text="the sandbox port did not answer")
        async with upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS
            })
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

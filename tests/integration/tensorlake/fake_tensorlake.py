"""A local fake of the Tensorlake HTTP API that the real ``tensorlake`` SDK talks to.

What it serves (learned from the SDK: its lifecycle client and the sandbox proxy client):

* lifecycle, under ``/v1/namespaces/<ns>/sandboxes``: ``POST`` create (answers ``running``),
  ``GET`` one or all, ``PATCH`` exposed ports, ``DELETE``;
* the sandbox daemon, reached at the returned ``sandbox_url`` with ``Host: <id>.local``:
  ``POST /api/v1/processes/run`` (server-sent events: output lines, then the exit event) and
  ``GET``/``PUT``/``DELETE /api/v1/files?path=``;
* ingress: ``Host: <port>-<id>.localhost:<port of this server>`` is proxied to the sandbox's
  port (the cloud's public port URLs; tests resolve ``*.localhost`` to 127.0.0.1).

Each sandbox is a real container on the local Docker engine so that exec, copies and ports
really work: host networking (a sandbox port is that port on 127.0.0.1) and the host's Docker
socket and CLI mounted in, standing in for the Docker daemon of ``agentenv-dind-host-v1``.
Every request is recorded in ``requests`` (method, path, JSON body, authorization).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import secrets
import tarfile
import time
from typing import Any

import aiohttp
from aiohttp import web

API_KEY = "tl-test-key"
BASE_IMAGE = "python:3.11-slim"
NAMESPACE_PATH = re.compile(r"^/v1/namespaces/(?P<ns>[^/]+)/sandboxes(?:/(?P<id>[^/]+))?$")
INGRESS_HOST = re.compile(r"^(?P<port>\d+)-(?P<id>[^.]+)\.localhost(?::\d+)?$")
FAKE_LABEL = "agentenv.fake-tensorlake"
KEEP_ALIVE = ["/bin/sh", "-c", "while :; do sleep 3600; done"]
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class FakeTensorlake:
    """The fake service: its state, the aiohttp app and the containers behind sandboxes."""

    def __init__(self, docker_client: Any, *, images: dict[str, str], api_key: str,
                 docker_images: tuple[str, ...] = ("agentenv-dind-host-v1",)) -> None:
        self.docker = docker_client
        self.images = images  # Tensorlake image name -> local Docker image
        self.docker_images = docker_images  # images that come with a Docker daemon
        self.api_key = api_key
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.unreachable: set[str] = set()  # sandbox ids whose daemon drops connections
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None

    # -- lifecycle of the fake -----------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    async def start(self) -> str:
        self._runner = web.AppRunner(self.app())
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.url

    async def stop(self) -> None:
        for sandbox_id in list(self.sandboxes):
            await asyncio.to_thread(self._remove, sandbox_id)
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def calls(self, method: str, path_pattern: str) -> list[dict[str, Any]]:
        return [r for r in self.requests
                if r["method"] == method and re.search(path_pattern, r["path"])]

    # -- routing -------------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        host = request.headers.get("Host", "")
        ingress = INGRESS_HOST.match(host)
        if ingress:
            return await self.ingress(request, ingress["id"], int(ingress["port"]))
        body = await request.read()
        self.requests.append({
            "method": request.method, "path": request.path, "query": dict(request.query),
            "host": host, "authorization": request.headers.get("Authorization"),
            "json": _json_or_none(body), "size": len(body),
        })
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"message": "invalid API key"}, status=401)
        lifecycle = NAMESPACE_PATH.match(request.path)
        if lifecycle:
            return await self.lifecycle(request, lifecycle["id"], body)
        sandbox_id = host.split(".", 1)[0]
        if request.path.startswith("/api/v1/"):
            if sandbox_id in self.unreachable and request.transport is not None:
                request.transport.close()  # the connection drops mid-request
                return web.Response(status=503)
            if sandbox_id not in self.sandboxes:
                return web.json_response({"message": f"sandbox {sandbox_id} not found"},
                                         status=404)
            return await self.daemon(request, sandbox_id, body)
        return web.json_response({"message": f"no route {request.path}"}, status=404)

    # -- lifecycle API ---------------------------------------------------------------------

    async def lifecycle(self, request: web.Request, sandbox_id: str | None,
                        body: bytes) -> web.Response:
        if request.method == "POST" and sandbox_id is None:
            return await self.create(json.loads(body or b"{}"))
        if request.method == "GET" and sandbox_id is None:
            return web.json_response({"sandboxes": [self.info(i) for i in self.sandboxes]})
        if sandbox_id not in self.sandboxes:
            return web.json_response({"message": f"sandbox {sandbox_id} not found"}, status=404)
        if request.method == "GET":
            return web.json_response(self.info(sandbox_id))
        if request.method == "PATCH":
            update = json.loads(body or b"{}")
            record = self.sandboxes[sandbox_id]
            if "exposed_ports" in update:
                record["exposed_ports"] = sorted(set(update["exposed_ports"]))
            if update.get("allow_unauthenticated_access") is not None:
                record["allow_unauthenticated_access"] = update["allow_unauthenticated_access"]
            return web.json_response(self.info(sandbox_id))
        if request.method == "DELETE":
            await asyncio.to_thread(self._remove, sandbox_id)
            return web.Response(status=200)
        return web.json_response({"message": "method not allowed"}, status=405)

    async def create(self, request: dict[str, Any]) -> web.Response:
        image = request.get("image") or "agentenv-dind-host-v1"
        local = self.images.get(image)
        if local is None:
            return web.json_response({"message": f"image {image} not found"}, status=400)
        sandbox_id = secrets.token_hex(8)
        container = await asyncio.to_thread(self._start_container, sandbox_id, local,
                                            image in self.docker_images)
        resources = request.get("resources") or {}
        self.sandboxes[sandbox_id] = {
            "container": container, "image": image, "name": request.get("name"),
            "timeout_secs": request.get("timeout_secs"),
            "resources": {"cpus": resources.get("cpus") or 1.0,
                          "memory_mb": resources.get("memory_mb") or 1024,
                          "disk_mb": resources.get("disk_mb") or 10240},
            "exposed_ports": sorted(set(request.get("exposed_ports") or [])),
            "allow_unauthenticated_access": bool(request.get("allow_unauthenticated_access")),
            "created_at": int(time.time()),
        }
        info = self.info(sandbox_id)
        return web.json_response({
            "sandbox_id": sandbox_id, "status": "running", "name": info["name"],
            "sandbox_url": info["sandbox_url"], "ingress_endpoint": info["ingress_endpoint"],
        })

    def info(self, sandbox_id: str) -> dict[str, Any]:
        record = self.sandboxes[sandbox_id]
        return {
            "id": sandbox_id, "namespace": "default", "status": "running",
            "image": record["image"], "name": record["name"], "resources": record["resources"],
            "timeout_secs": record["timeout_secs"], "exposed_ports": record["exposed_ports"],
            "allow_unauthenticated_access": record["allow_unauthenticated_access"],
            "sandbox_url": self.url, "ingress_endpoint": f"http://localhost:{self.port}",
        }

    def _start_container(self, sandbox_id: str, image: str, with_docker: bool) -> Any:
        import shutil

        volumes: dict[str, dict[str, str]] = {}
        docker_cli = shutil.which("docker")
        if with_docker and docker_cli:
            volumes["/var/run/docker.sock"] = {"bind": "/var/run/docker.sock", "mode": "rw"}
            volumes[docker_cli] = {"bind": "/usr/local/bin/docker", "mode": "ro"}
        return self.docker.containers.run(
            image, KEEP_ALIVE, detach=True, name=f"fake-tensorlake-{sandbox_id}",
            network_mode="host", volumes=volumes,
            labels={FAKE_LABEL: sandbox_id, "agentenv.sandbox": sandbox_id},
        )

    def _remove(self, sandbox_id: str) -> None:
        """The sandbox's container and whatever its Docker daemon ran (they share ours)."""
        self.sandboxes.pop(sandbox_id, None)
        label = {"label": f"agentenv.sandbox={sandbox_id}"}
        for container in self.docker.containers.list(all=True, filters=label):
            container.remove(force=True)
        for network in self.docker.networks.list(filters=label):
            network.remove()

    # -- the sandbox daemon ----------------------------------------------------------------

    async def daemon(self, request: web.Request, sandbox_id: str,
                     body: bytes) -> web.StreamResponse:
        container = self.sandboxes[sandbox_id]["container"]
        if request.path == "/api/v1/processes/run" and request.method == "POST":
            return await self.run(request, container, json.loads(body))
        if request.path == "/api/v1/files":
            path = request.query.get("path", "")
            if request.method == "PUT":
                await asyncio.to_thread(_put, container, path, body)
                return web.Response(status=200)
            if request.method == "GET":
                data = await asyncio.to_thread(_get, container, path)
                if data is None:
                    return web.json_response({"message": f"{path}: no such file"}, status=404)
                return web.Response(body=data, content_type="application/octet-stream")
            if request.method == "DELETE":
                await asyncio.to_thread(container.exec_run, ["rm", "-rf", path])
                return web.Response(status=200)
        return web.json_response({"message": f"no route {request.path}"}, status=404)

    async def run(self, request: web.Request, container: Any,
                  payload: dict[str, Any]) -> web.StreamResponse:
        argv = [payload["command"], *(payload.get("args") or [])]
        timeout = payload.get("timeout")
        if timeout:
            argv = ["timeout", "-s", "KILL", str(timeout), *argv]
        code, (out, err) = await asyncio.to_thread(
            lambda: container.exec_run(argv, environment=payload.get("env") or None,
                                       workdir=payload.get("working_dir"), demux=True)
        )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        now = int(time.time() * 1000)
        for stream, data in (("stdout", out), ("stderr", err)):
            for line in (data or b"").decode("utf-8", "replace").splitlines():
                event = {"line": line, "stream": stream, "timestamp": now}
                await response.write(f"data: {json.dumps(event)}\n\n".encode())
        exit_event: dict[str, Any] = {"exit_code": code, "reason": "exited"}
        if timeout and code == 137:
            exit_event = {"exit_code": None, "signal": 9, "reason": "timed_out"}
        await response.write(f"data: {json.dumps(exit_event)}\n\n".encode())
        await response.write_eof()
        return response

    # -- ingress: public port URLs ----------------------------------------------------------

    async def ingress(self, request: web.Request, sandbox_id: str,
                      port: int) -> web.StreamResponse:
        record = self.sandboxes.get(sandbox_id)
        if record is None or port not in record["exposed_ports"]:
            return web.Response(status=404, text=f"port {port} of {sandbox_id} is not exposed")
        if self._http is None:
            self._http = aiohttp.ClientSession(auto_decompress=False)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        try:
            upstream = await self._http.request(
                request.method, f"http://127.0.0.1:{port}{request.path_qs}", headers=headers,
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


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _put(container: Any, path: str, data: bytes) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    container.put_archive("/", buffer.getvalue())


def _get(container: Any, path: str) -> bytes | None:
    import docker.errors

    try:
        chunks, _ = container.get_archive(path)
    except docker.errors.NotFound:
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
        member = tar.next()
        handle = tar.extractfile(member) if member is not None else None
        return handle.read() if handle is not None else None

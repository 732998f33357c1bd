"""A local fake of the Tensorlake HTTP API that the real ``tensorlake`` SDK talks to.

What it serves (learned from the SDK: its lifecycle client and the sandbox proxy client):

* lifecycle, under ``/v1/namespaces/<ns>/sandboxes``: ``POST`` create (answers ``running``),
  ``GET`` one or all, ``PATCH`` exposed ports, ``DELETE``;
* the sandbox daemon, reached at the returned ``sandbox_url`` with ``Host: <id>.local``:
  ``POST /api/v1/processes/run`` (server-sent events: output lines, then the exit event) and
  ``GET``/``PUT``/``DELETE /api/v1/files?path=``;
* ingress: ``Host: <port>-<id>.localhost:<port of this server>`` is proxied to the sandbox's
  port (the cloud's public port URLs; tests resolve ``*.localhost`` to 127.0.0.1).

Each sandbox is a real container on the local Docker engine (:mod:`sandbox_containers`), so
exec, copies and ports really work; one booted from ``agentenv-dind-host-v1`` gets the host's
Docker socket and CLI, standing in for its Docker daemon. Every request is recorded in
``requests`` (method, path, headers, JSON body).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from typing import Any

from aiohttp import web
from sandbox_containers import FakeCloudServer, SandboxContainers, get_file, put_file

API_KEY = "tl-test-key"
BASE_IMAGE = "python:3.11-slim"
NAMESPACE_PATH = re.compile(r"^/v1/namespaces/(?P<ns>[^/]+)/sandboxes(?:/(?P<id>[^/]+))?$")
FAKE_LABEL = "agentenv.fake-tensorlake"


class FakeTensorlake(FakeCloudServer):
    """The fake service: its state, the aiohttp app and the containers behind sandboxes."""

    def __init__(self, docker_client: Any, *, images: dict[str, str], api_key: str,
                 docker_images: tuple[str, ...] = ("agentenv-dind-host-v1",)) -> None:
        super().__init__()
        self.containers = SandboxContainers(docker_client, FAKE_LABEL)
        self.docker = docker_client
        self.images = images  # Tensorlake image name -> local Docker image
        self.docker_images = docker_images  # images that come with a Docker daemon
        self.api_key = api_key
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.unreachable: set[str] = set()  # sandbox ids whose daemon drops connections

    async def close(self) -> None:
        for sandbox_id in list(self.sandboxes):
            await asyncio.to_thread(self._remove, sandbox_id)

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        record = self.sandboxes.get(sandbox_id)
        return record is not None and port in record["exposed_ports"]

    # -- routing -------------------------------------------------------------------------

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"message": "invalid API key"}, status=401)
        lifecycle = NAMESPACE_PATH.match(request.path)
        if lifecycle:
            return await self.lifecycle(request, lifecycle["id"], body)
        sandbox_id = request.headers.get("Host", "").split(".", 1)[0]
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
        container = await asyncio.to_thread(self.containers.start, sandbox_id, local,
                                            with_docker=image in self.docker_images)
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

    def _remove(self, sandbox_id: str) -> None:
        self.sandboxes.pop(sandbox_id, None)
        self.containers.remove(sandbox_id)

    # -- the sandbox daemon ----------------------------------------------------------------

    async def daemon(self, request: web.Request, sandbox_id: str,
                     body: bytes) -> web.StreamResponse:
        container = self.sandboxes[sandbox_id]["container"]
        if request.path == "/api/v1/processes/run" and request.method == "POST":
            return await self.run(request, container, json.loads(body))
        if request.path == "/api/v1/files":
            path = request.query.get("path", "")
            if request.method == "PUT":
                await asyncio.to_thread(put_file, container, path, body)
                return web.Response(status=200)
            if request.method == "GET":
                data = await asyncio.to_thread(get_file, container, path)
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

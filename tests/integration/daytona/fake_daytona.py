"""A local fake of the Daytona HTTP API that the real ``daytona`` SDK talks to.

What it serves (learned from the SDK's generated clients, ``daytona_api_client_async`` and
``daytona_toolbox_api_client_async``):

* the API, under ``/api``: ``POST /sandbox`` (answers ``started``), ``GET /sandbox`` (label
  filter, one page), ``GET``/``DELETE /sandbox/{idOrName}``, ``GET
  /sandbox/{id}/ports/{port}/preview-url`` and ``GET /sandbox/{id}/toolbox-proxy-url``;
* the toolbox, under ``/toolbox/{id}``: ``POST /process/execute`` (one combined output string,
  as Daytona answers), ``POST /files/bulk-upload`` (multipart in) and ``POST
  /files/bulk-download`` (multipart out, an ``error`` part for a missing file);
* preview URLs, ``http://<port>-<id>.localhost:<port of the fake>``, proxied to the port.

Errors come in Daytona's shape (``{"statusCode", "message", "error"}``), which the SDK maps to
its typed exceptions. Faults a test can inject: ``create_faults`` (answers for the next creates:
a 429 with ``Retry-After``, a 403 quota refusal), ``create_delay`` (a create that answers
late), ``unreachable`` (sandbox ids whose toolbox drops connections) and :meth:`vanish`
(the service deletes a sandbox under a run).
Sandboxes are real containers (:mod:`sandbox_containers`).
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import json
import re
import secrets
import time
import uuid
from typing import Any

from aiohttp import web
from sandbox_containers import FakeCloudServer, SandboxContainers, get_file, put_file

API_KEY = "dtn_test_key"
BASE_IMAGE = "python:3.11-slim"
DOCKER_SNAPSHOT = "docker-host-snapshot"
FAKE_LABEL = "agentenv.fake-daytona"
SANDBOX_PATH = re.compile(r"^/api/sandbox(?:/(?P<ref>[^/]+)(?P<rest>/.*)?)?$")
TOOLBOX_PATH = re.compile(r"^/toolbox/(?P<id>[^/]+)(?P<rest>/.*)$")
PREVIEW_PATH = re.compile(r"^/ports/(?P<port>\d+)/preview-url$")
STATUS_NAMES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                409: "Conflict", 429: "Too Many Requests"}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"statusCode": status, "message": message,
                              "error": STATUS_NAMES.get(status, "Error")},
                             status=status, headers=headers)


class FakeDaytona(FakeCloudServer):
    """The fake service: its sandboxes, the faults to inject and the containers behind them."""

    def __init__(self, docker_client: Any, *, images: dict[str, str],
                 snapshots: dict[str, str], api_key: str = API_KEY) -> None:
        super().__init__()
        self.containers = SandboxContainers(docker_client, FAKE_LABEL)
        self.docker = docker_client
        self.images = images  # image named in a Dockerfile's FROM -> local Docker image
        self.snapshots = snapshots  # Docker-capable snapshot name -> local Docker image
        self.api_key = api_key
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.create_faults: list[tuple[int, str, dict[str, str]]] = []
        self.unreachable: set[str] = set()
        self.create_delay = 0.0  # seconds a create answers late, its sandbox made already

    async def close(self) -> None:
        for sandbox_id in list(self.sandboxes):
            await asyncio.to_thread(self._remove, sandbox_id)

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        record = self.sandboxes.get(sandbox_id)
        return record is not None and record["public"]

    def vanish(self, sandbox_id: str) -> None:
        """The service deletes the sandbox on its own (killed, out of credit)."""
        self._remove(sandbox_id)

    def _remove(self, sandbox_id: str) -> None:
        self.sandboxes.pop(sandbox_id, None)
        self.containers.remove(sandbox_id)

    # -- routing ---------------------------------------------------------------------------

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return error(401, "Invalid API key")
        toolbox = TOOLBOX_PATH.match(request.path)
        if toolbox:
            return await self.toolbox(request, toolbox["id"], toolbox["rest"], body)
        found = SANDBOX_PATH.match(request.path)
        if found is None:
            return error(404, f"Cannot {request.method} {request.path}")
        ref, rest = found["ref"], found["rest"] or ""
        if ref is None:
            if request.method == "POST":
                return await self.create(json.loads(body or b"{}"))
            if request.method == "GET":
                return self.list(request)
            return error(404, f"Cannot {request.method} {request.path}")
        sandbox_id = self.resolve(ref)
        if sandbox_id is None:
            return error(404, f"Sandbox with ID or name {ref} not found")
        if not rest and request.method == "GET":
            return web.json_response(self.dto(sandbox_id))
        if not rest and request.method == "DELETE":
            dto = {**self.dto(sandbox_id), "state": "destroying"}
            await asyncio.to_thread(self._remove, sandbox_id)
            return web.json_response(dto)
        if rest == "/toolbox-proxy-url" and request.method == "GET":
            return web.json_response({"url": f"{self.url}/toolbox"})
        preview = PREVIEW_PATH.match(rest)
        if preview and request.method == "GET":
            port = int(preview["port"])
            return web.json_response({
                "sandboxId": sandbox_id, "token": secrets.token_hex(8),
                "url": f"http://{port}-{sandbox_id}.localhost:{self.port}",
            })
        return error(404, f"Cannot {request.method} {request.path}")

    def resolve(self, ref: str) -> str | None:
        if ref in self.sandboxes:
            return ref
        return next((i for i, r in self.sandboxes.items() if r["name"] == ref), None)

    # -- the API ---------------------------------------------------------------------------

    async def create(self, sent: dict[str, Any]) -> web.Response:
        if self.create_faults:
            status, message, headers = self.create_faults.pop(0)
            return error(status, message, headers)
        name = sent.get("name") or str(uuid.uuid4())
        if self.resolve(name) is not None:
            return error(409, f"Sandbox with name {name} already exists")
        snapshot = sent.get("snapshot")
        dockerfile = (sent.get("buildInfo") or {}).get("dockerfileContent") or ""
        if snapshot:
            local, with_docker = self.snapshots.get(snapshot), True
            if local is None:
                return error(404, f"Snapshot {snapshot} not found")
        else:
            base = re.search(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
            local = self.images.get(base[1]) if base else None
            if local is None:
                return error(400, f"cannot build image: unknown base in {dockerfile!r}")
            with_docker = "docker-ce" in dockerfile
        sandbox_id = str(uuid.uuid4())
        env = sent.get("env") or {}
        container = await asyncio.to_thread(self.containers.start, sandbox_id, local,
                                            with_docker=with_docker, env=env)
        self.sandboxes[sandbox_id] = {
            "container": container, "name": name, "env": env, "labels": sent.get("labels") or {},
            "public": bool(sent.get("public")), "snapshot": snapshot,
            "networkBlockAll": bool(sent.get("networkBlockAll")),
            "cpu": sent.get("cpu") or 1, "memory": sent.get("memory") or 1,
            "disk": sent.get("disk") or 3, "target": sent.get("target") or "us",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        }
        await asyncio.sleep(self.create_delay)
        return web.json_response(self.dto(sandbox_id))

    def list(self, request: web.Request) -> web.Response:
        wanted = json.loads(request.query.get("labels") or "{}")
        items = [self.dto(i) for i, r in self.sandboxes.items()
                 if all(r["labels"].get(k) == v for k, v in wanted.items())]
        return web.json_response({"items": items, "nextCursor": None})

    def dto(self, sandbox_id: str) -> dict[str, Any]:
        r = self.sandboxes[sandbox_id]
        return {
            "id": sandbox_id, "organizationId": "org-fake", "name": r["name"],
            "user": "daytona", "env": r["env"], "labels": r["labels"], "public": r["public"],
            "networkBlockAll": r["networkBlockAll"], "kvm": False, "target": r["target"],
            "cpu": r["cpu"], "gpu": 0, "memory": r["memory"], "disk": r["disk"],
            "state": "started", "desiredState": "started", "snapshot": r["snapshot"],
            "createdAt": r["created"], "updatedAt": r["created"],
            "toolboxProxyUrl": f"{self.url}/toolbox",
        }

    # -- the toolbox -----------------------------------------------------------------------

    async def toolbox(self, request: web.Request, sandbox_id: str, rest: str,
                      body: bytes) -> web.StreamResponse:
        if sandbox_id in self.unreachable and request.transport is not None:
            request.transport.close()  # the connection drops mid-request
            return web.Response(status=502)
        record = self.sandboxes.get(sandbox_id)
        if record is None:
            return error(404, f"Sandbox {sandbox_id} not found")
        container = record["container"]
        if rest == "/process/execute" and request.method == "POST":
            return await self.execute(container, json.loads(body))
        if rest == "/files/bulk-upload" and request.method == "POST":
            for path, data in _form_files(request.headers["Content-Type"], body):
                await asyncio.to_thread(put_file, container, path, data)
            return web.Response(status=200)
        if rest == "/files/bulk-download" and request.method == "POST":
            paths = json.loads(body)["paths"]
            files = [(p, await asyncio.to_thread(get_file, container, p)) for p in paths]
            return _multipart_files(files)
        return error(404, f"Cannot {request.method} {request.path}")

    async def execute(self, container: Any, sent: dict[str, Any]) -> web.Response:
        argv = ["sh", "-c", sent["command"]]
        if sent.get("timeout"):
            argv = ["timeout", "-s", "KILL", str(sent["timeout"]), *argv]
        code, output = await asyncio.to_thread(
            lambda: container.exec_run(argv, environment=sent.get("envs") or None,
                                       workdir=sent.get("cwd") or None)
        )
        return web.json_response({"exitCode": code,
                                  "result": output.decode("utf-8", "replace")})


def _form_files(content_type: str, body: bytes) -> list[tuple[str, bytes]]:
    """``files[i].path`` and ``files[i].file`` of a multipart upload, paired by ``i``."""
    message = email.parser.BytesParser(policy=email.policy.default).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    paths: dict[str, str] = {}
    datas: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition") or ""
        index, _, field = str(name).partition("].")
        payload = part.get_payload(decode=True) or b""
        if field == "path":
            paths[index] = payload.decode()
        elif field == "file":
            datas[index] = payload
    return [(paths[i], datas[i]) for i in sorted(paths)]


def _multipart_files(files: list[tuple[str, bytes | None]]) -> web.Response:
    """Daytona's bulk-download answer: a ``file`` part per file, an ``error`` part per miss."""
    boundary = secrets.token_hex(12)
    out = bytearray()
    for path, data in files:
        if data is None:
            name, kind = "error", "application/json"
            data = json.dumps({"message": f"file not found: {path}", "statusCode": 404,
                               "code": "FILE_NOT_FOUND"}).encode()
        else:
            name, kind = "file", "application/octet-stream"
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; "
                f"filename=\"{path}\"\r\nContent-Type: {kind}\r\n\r\n").encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return web.Response(body=bytes(out), headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}"})

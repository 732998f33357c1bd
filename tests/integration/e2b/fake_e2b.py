"""A local fake of E2B (its API and each sandbox's envd) that the real ``e2b`` SDK talks to.

What it serves (learned from the SDK: ``e2b.api.client`` and ``e2b.envd``):

* the API (aiohttp, key in ``X-API-KEY``): ``POST /sandboxes``, ``GET``/``DELETE
  /sandboxes/{id}``, ``POST /sandboxes/{id}/connect`` and ``GET /v2/sandboxes`` (metadata
  filter, one page), errors as ``{"code", "message"}``;
* envd, the daemon in every sandbox, at one ``sandbox_url`` for all (the SDK then names the
  sandbox in ``E2b-Sandbox-Id``): ``process.Process/Start`` over the Connect protocol, served
  by the ``connectrpc`` server classes the SDK's own generated code provides (uvicorn), and
  ``GET``/``POST /files``;
* public ports, ``<port>-<id>.localhost:<API port>`` (the sandbox's ``domain`` is the API's
  address), proxied to the port.

Faults a test can inject: ``create_faults`` (answers for the next creates: a 429, a 401),
``create_delay`` (a create that answers late), ``unreachable`` (sandbox ids whose envd answers
502, as E2B's edge does for a sandbox it cannot reach) and :meth:`vanish` (the service kills a
sandbox under a run). Sandboxes are real containers (:mod:`sandbox_containers`).
"""

from __future__ import annotations

import asyncio
import contextvars
import email.parser
import email.policy
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from e2b.envd.process.process_connect import Process
from sandbox_containers import FakeCloudServer, SandboxContainers, get_file, put_file

API_KEY = "e2b_test_key"
BASE_IMAGE = "python:3.11-slim"
DOCKER_TEMPLATE = "agentenv-docker-host"
FAKE_LABEL = "agentenv.fake-e2b"
ENVD_VERSION = "0.6.4"
KEEPALIVE_SECONDS = 5.0
_CONTAINER: contextvars.ContextVar[Any] = contextvars.ContextVar("fake_e2b_container")


def fake_settings(fake: FakeE2B, **more: Any) -> dict[str, Any]:
    """The provider's config for the fake: a self-hosted E2B, as far as the SDK knows."""
    return {"api_key": API_KEY, "base_template": DOCKER_TEMPLATE, "api_url": fake.url,
            "sandbox_url": fake.sandbox_url, **more}


def error(status: int, message: str) -> web.Response:
    return web.json_response({"code": status, "message": message}, status=status)


class FakeE2B(FakeCloudServer):
    """The fake service: the API, envd, its sandboxes and the faults to inject."""

    def __init__(self, docker_client: Any, *, templates: dict[str, str],
                 api_key: str = API_KEY) -> None:
        super().__init__()
        self.containers = SandboxContainers(docker_client, FAKE_LABEL)
        self.docker = docker_client
        self.templates = templates  # template name -> local Docker image (with Docker)
        self.api_key = api_key
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.create_faults: list[tuple[int, str]] = []
        self.create_delay = 0.0
        self.unreachable: set[str] = set()
        self.envd = FakeEnvd(self)

    @property
    def sandbox_url(self) -> str:
        return self.envd.url

    def start(self) -> str:
        url = super().start()
        self.envd.start()
        return url

    def stop(self) -> None:
        self.envd.stop()
        super().stop()

    async def close(self) -> None:
        for sandbox_id in list(self.sandboxes):
            await asyncio.to_thread(self._remove, sandbox_id)

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        return sandbox_id in self.sandboxes  # every port of a sandbox is public

    def vanish(self, sandbox_id: str) -> None:
        """The service kills the sandbox on its own (its timeout, out of credit)."""
        self._remove(sandbox_id)

    def _remove(self, sandbox_id: str) -> None:
        self.sandboxes.pop(sandbox_id, None)
        self.containers.remove(sandbox_id)

    # -- the API ---------------------------------------------------------------------------

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if request.headers.get("X-API-KEY") != self.api_key:
            return error(401, "Invalid API key, it must start with 'e2b_'")
        parts = request.path.strip("/").split("/")
        if parts == ["sandboxes"] and request.method == "POST":
            return await self.create(json.loads(body or b"{}"))
        if parts == ["v2", "sandboxes"] and request.method == "GET":
            return self.list(request)
        if len(parts) >= 2 and parts[0] == "sandboxes":
            sandbox_id = parts[1]
            if sandbox_id not in self.sandboxes:
                return error(404, f"sandbox \"{sandbox_id}\" doesn't exist or you don't have "
                                  "access to it")
            if len(parts) == 2 and request.method == "GET":
                return web.json_response(self.detail(sandbox_id))
            if len(parts) == 2 and request.method == "DELETE":
                await asyncio.to_thread(self._remove, sandbox_id)
                return web.Response(status=204)
            if parts[2:] == ["connect"] and request.method == "POST":
                return web.json_response(self.created(sandbox_id), status=200)
        return error(404, f"no route {request.method} {request.path}")

    async def create(self, sent: dict[str, Any]) -> web.Response:
        if self.create_faults:
            status, message = self.create_faults.pop(0)
            return error(status, message)
        template = sent.get("templateID") or "base"
        image = self.templates.get(template)
        if image is None:
            return error(404, f"template '{template}' not found")
        sandbox_id = "i" + secrets.token_hex(9)
        envs = sent.get("envVars") or {}
        container = await asyncio.to_thread(self.containers.start, sandbox_id, image,
                                            with_docker=True, env=envs)
        now = time.time()
        self.sandboxes[sandbox_id] = {
            "container": container, "template": template, "envs": envs,
            "metadata": sent.get("metadata") or {}, "timeout": sent.get("timeout"),
            "allow_internet_access": sent.get("allow_internet_access", True),
            "started": now, "end": now + int(sent.get("timeout") or 300),
        }
        await asyncio.sleep(self.create_delay)
        return web.json_response(self.created(sandbox_id), status=201)

    def created(self, sandbox_id: str) -> dict[str, Any]:
        return {"templateID": self.sandboxes[sandbox_id]["template"], "sandboxID": sandbox_id,
                "clientID": "fake-client", "envdVersion": ENVD_VERSION,
                "domain": f"localhost:{self.port}"}

    def detail(self, sandbox_id: str) -> dict[str, Any]:
        r = self.sandboxes[sandbox_id]
        stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
        return {**self.created(sandbox_id), "startedAt": stamp(r["started"]),
                "endAt": stamp(r["end"]), "cpuCount": 2, "memoryMB": 512,
                "diskSizeMB": 10240, "state": "running", "metadata": r["metadata"],
                "allowInternetAccess": r["allow_internet_access"]}

    def list(self, request: web.Request) -> web.Response:
        wanted = dict(urllib.parse.parse_qsl(request.query.get("metadata") or ""))
        return web.json_response([
            self.detail(i) for i, r in self.sandboxes.items()
            if all(r["metadata"].get(k) == v for k, v in wanted.items())
        ])


class ProcessService(Process):
    """envd's ``process.Process``: ``Start`` runs the command in the sandbox's container (the
    other methods answer ``unimplemented``, as the generated base does)."""

    async def start(self, request: Any, ctx: Any) -> AsyncIterator[Any]:
        from e2b.envd.process.process_pb import ProcessEvent, StartResponse
        from protobuf import Oneof

        def event(kind: str, value: Any) -> Any:
            return StartResponse(event=ProcessEvent(event=Oneof(kind, value)))

        container = _CONTAINER.get()
        config = request.process
        argv = [config.cmd, *config.args]
        cwd = config.cwd if config.has_field("cwd") else None
        run = asyncio.ensure_future(asyncio.to_thread(
            container.exec_run, argv, environment=dict(config.envs) or None, workdir=cwd,
            demux=True))
        yield event("start", ProcessEvent.StartEvent(pid=secrets.randbelow(30000) + 100))
        while not run.done():  # a long command keeps the stream alive, as envd does
            await asyncio.wait([run], timeout=KEEPALIVE_SECONDS)
            if not run.done():
                yield event("keepalive", ProcessEvent.KeepAlive())
        code, (out, err) = run.result()
        for stream, data in (("stdout", out), ("stderr", err)):
            if data:
                yield event("data", ProcessEvent.DataEvent(output=Oneof(stream, data)))
        yield event("end", ProcessEvent.EndEvent(exit_code=code, exited=True,
                                                 status=f"exit status {code}"))


class FakeEnvd:
    """envd for every sandbox of a :class:`FakeE2B`, an ASGI app under uvicorn in a thread."""

    def __init__(self, fake: FakeE2B) -> None:
        from e2b.envd.process.process_connect import ProcessASGIApplication

        self.fake = fake
        self.process = ProcessASGIApplication(ProcessService())
        self.port = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        import uvicorn

        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning",
                                lifespan="off", interface="asgi3")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake envd did not start")
            time.sleep(0.02)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        sandbox_id = headers.get("e2b-sandbox-id", "")
        self.fake.requests.append({"method": scope["method"], "path": scope["path"],
                                   "host": "envd", "headers": headers, "json": None,
                                   "query": scope.get("query_string", b"").decode(),
                                   "size": 0})
        record = self.fake.sandboxes.get(sandbox_id)
        if sandbox_id in self.fake.unreachable:
            return await _respond(send, 502, b'{"message": "sandbox not reachable"}')
        if record is None:
            return await _respond(send, 502, b'{"message": "The sandbox was not found"}')
        if scope["path"].startswith("/process.Process/"):
            token = _CONTAINER.set(record["container"])
            try:
                return await self.process(scope, receive, send)
            finally:
                _CONTAINER.reset(token)
        if scope["path"] == "/files":
            return await self.files(scope, receive, send, record["container"])
        if scope["path"] == "/health":
            return await _respond(send, 204, b"")
        return await _respond(send, 404, b'{"message": "no such route"}')

    async def files(self, scope: dict[str, Any], receive: Any, send: Any,
                    container: Any) -> None:
        query = dict(urllib.parse.parse_qsl(scope.get("query_string", b"").decode()))
        path = query.get("path", "")
        if scope["method"] == "GET":
            data = await asyncio.to_thread(get_file, container, path)
            if data is None:
                return await _respond(send, 404, json.dumps(
                    {"code": 404, "message": f"path '{path}' does not exist"}).encode())
            return await _respond(send, 200, data, "application/octet-stream")
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        parsed = email.parser.BytesParser(policy=email.policy.default).parsebytes(
            f"Content-Type: {headers['content-type']}\r\n\r\n".encode() + bytes(body))
        written = []
        for part in parsed.iter_parts():
            target = path or str(part.get_param("filename", header="content-disposition"))
            await asyncio.to_thread(put_file, container, target,
                                    part.get_payload(decode=True) or b"")
            written.append({"name": target.rsplit("/", 1)[-1], "type": "file", "path": target})
        return await _respond(send, 200, json.dumps(written).encode())


async def _respond(send: Any, status: int, body: bytes,
                   content_type: str = "application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode())]})
    await send({"type": "http.response.body", "body": body})

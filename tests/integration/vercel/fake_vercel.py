"""A local fake of the Vercel Sandbox API that the real ``vercel-sandbox`` SDK talks to.

What it serves (learned from the SDK's ``vercel.sandbox._internal.api_client``), bearer token
and ``teamId`` checked on every call:

* ``POST /v3/sandboxes`` (answers the sandbox ``running``, its session and one route per port),
  ``GET /v2/sandboxes`` (one ``tags=key:value`` filter, one page), ``GET``/``DELETE
  /v2/sandboxes/{name}``;
* a session's commands, ``POST /v2/sandboxes/sessions/{id}/cmd?wait=true&logs=true``: NDJSON,
  the command, its output lines and the command again with its exit code;
* its files, ``POST .../fs/write`` (a gzipped tar) and ``POST .../fs/read`` (the bytes, or a
  404);
* routes, ``http://<port>-<name>.localhost:<port of the fake>``, proxied to the port.

Errors come as ``{"error": {"code", "message"}}``. Faults a test can inject: ``create_faults``
(HTTP statuses for the next creates), ``create_delay``, ``unreachable`` (sandboxes whose
session calls drop the connection) and :meth:`vanish` (Vercel stops a sandbox under a run).
Sandboxes are real containers (:mod:`sandbox_containers`).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import secrets
import time
from typing import Any

from aiohttp import web
from sandbox_containers import FakeCloudServer, SandboxContainers, get_file

TOKEN = "vercel_test_token"
TEAM = "team_fake"
PROJECT = "prj_fake"
BASE_IMAGE = "python:3.11-slim"
FAKE_LABEL = "agentenv.fake-vercel"
SESSION_PATH = re.compile(r"^/v2/sandboxes/sessions/(?P<id>[^/]+)/(?P<rest>.+)$")
SANDBOX_PATH = re.compile(r"^/v2/sandboxes/(?P<name>[^/]+)$")


def fake_settings(fake: FakeVercel, **more: Any) -> dict[str, Any]:
    return {"token": TOKEN, "team_id": TEAM, "project_id": PROJECT, "api_url": fake.url,
            "image": "agentenv-docker", **more}


def error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


class FakeVercel(FakeCloudServer):
    """The fake service: its sandboxes, the faults to inject and the containers behind them."""

    def __init__(self, docker_client: Any, *, images: dict[str, str]) -> None:
        super().__init__()
        self.containers = SandboxContainers(docker_client, FAKE_LABEL)
        self.docker = docker_client
        self.images = images
        self.sandboxes: dict[str, dict[str, Any]] = {}  # by name
        self.create_faults: list[int] = []
        self.create_delay = 0.0
        self.unreachable: set[str] = set()

    async def close(self) -> None:
        for name in list(self.sandboxes):
            await asyncio.to_thread(self._remove, name)

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        record = self.sandboxes.get(sandbox_id)
        return record is not None and port in record["ports"]

    def vanish(self, name: str) -> None:
        """Vercel stops the sandbox on its own (its time limit, out of credit)."""
        self._remove(name)

    def _remove(self, name: str) -> None:
        self.sandboxes.pop(name, None)
        self.containers.remove(name)

    def by_session(self, session_id: str) -> str | None:
        return next((n for n, r in self.sandboxes.items() if r["session"] == session_id), None)

    # -- routing ---------------------------------------------------------------------------

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}" or \
                request.query.get("teamId") != TEAM:
            return error(403, "forbidden", "Not authorized")
        if request.path == "/v3/sandboxes" and request.method == "POST":
            return await self.create(json.loads(body or b"{}"))
        if request.path == "/v2/sandboxes" and request.method == "GET":
            return self.list(request)
        session = SESSION_PATH.match(request.path)
        if session:
            return await self.session_call(request, session["id"], session["rest"], body)
        found = SANDBOX_PATH.match(request.path)
        if found:
            name = found["name"]
            if name not in self.sandboxes:
                return error(404, "not_found", f"Sandbox {name} not found")
            if request.method == "GET":
                return web.json_response(self.answer(name))
            if request.method == "DELETE":
                answer = self.answer(name, status="stopped")
                await asyncio.to_thread(self._remove, name)
                return web.json_response(answer)
        return error(404, "not_found", f"no route {request.method} {request.path}")

    # -- sandboxes -------------------------------------------------------------------------

    async def create(self, sent: dict[str, Any]) -> web.Response:
        if self.create_faults:
            status = self.create_faults.pop(0)
            return error(status, "injected", f"injected by the test ({status})")
        name = sent.get("name") or f"sbx-{secrets.token_hex(4)}"
        if name in self.sandboxes:
            return error(409, "conflict", f"Sandbox {name} already exists")
        image = self.images.get(sent.get("image") or "")
        if image is None:
            return error(400, "bad_request", f"unknown image {sent.get('image')!r}")
        env = sent.get("env") or {}
        container = await asyncio.to_thread(self.containers.start, name, image,
                                            with_docker=True, env=env)
        now = int(time.time() * 1000)
        self.sandboxes[name] = {
            "container": container, "session": "sess_" + secrets.token_hex(6),
            "ports": list(sent.get("ports") or []), "tags": sent.get("tags") or {},
            "sent": sent, "created": now,
        }
        await asyncio.sleep(self.create_delay)
        return web.json_response(self.answer(name), status=200)

    def answer(self, name: str, status: str = "running") -> dict[str, Any]:
        r = self.sandboxes[name]
        sent = r["sent"]
        resources = sent.get("resources") or {}
        sandbox = {
            "name": name, "currentSessionId": r["session"], "status": status,
            "image": sent.get("image"), "projectId": PROJECT, "cwd": "/vercel/sandbox",
            "region": sent.get("region") or "iad1", "tags": r["tags"],
            "memory": resources.get("memory"), "vcpus": resources.get("vcpus"),
            "createdAt": r["created"], "updatedAt": r["created"],
        }
        session = {"id": r["session"], "sandboxName": name, "projectId": PROJECT,
                   "status": status, "cwd": "/vercel/sandbox", "startedAt": r["created"],
                   "requestedAt": r["created"]}
        routes = [{"url": f"http://{port}-{name}.localhost:{self.port}", "port": port,
                   "subdomain": f"{port}-{name}"} for port in r["ports"]]
        return {"sandbox": sandbox, "session": session, "routes": routes}

    def list(self, request: web.Request) -> web.Response:
        key, _, value = (request.query.get("tags") or "").partition(":")
        found = [self.answer(n)["sandbox"] for n, r in self.sandboxes.items()
                 if not key or r["tags"].get(key) == value]
        return web.json_response({"sandboxes": found,
                                  "pagination": {"count": len(found), "next": None}})

    # -- a session's commands and files -----------------------------------------------------

    async def session_call(self, request: web.Request, session_id: str, rest: str,
                           body: bytes) -> web.StreamResponse:
        name = self.by_session(session_id)
        if name is not None and name in self.unreachable and request.transport is not None:
            request.transport.close()
            return web.Response(status=502)
        if name is None:
            return error(410, "session_stopped", f"session {session_id} is stopped")
        container = self.sandboxes[name]["container"]
        if rest == "cmd" and request.method == "POST":
            return await self.run(request, container, session_id, json.loads(body))
        if rest == "fs/write" and request.method == "POST":
            tar = gzip.decompress(body)
            await asyncio.to_thread(container.put_archive, request.headers.get("x-cwd", "/"),
                                    tar)
            return web.json_response({})
        if rest == "fs/read" and request.method == "POST":
            sent = json.loads(body)
            path = sent["path"] if sent["path"].startswith("/") else \
                f"{sent.get('cwd') or '/vercel/sandbox'}/{sent['path']}"
            data = await asyncio.to_thread(get_file, container, path)
            if data is None:
                return error(404, "file_not_found", f"{path}: no such file")
            return web.Response(body=data, content_type="application/octet-stream")
        return error(404, "not_found", f"no route {request.method} {request.path}")

    async def run(self, request: web.Request, container: Any, session_id: str,
                  sent: dict[str, Any]) -> web.StreamResponse:
        command = {"id": "cmd_" + secrets.token_hex(6), "name": sent["command"],
                   "args": sent.get("args") or [], "cwd": sent.get("cwd") or "/vercel/sandbox",
                   "sessionId": session_id, "startedAt": int(time.time() * 1000)}
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        await response.write(json.dumps({"command": command}).encode() + b"\n")
        code, (out, err) = await asyncio.to_thread(
            container.exec_run, [sent["command"], *command["args"]],
            environment=sent.get("env") or None, workdir=sent.get("cwd") or None, demux=True)
        for stream, data in (("stdout", out), ("stderr", err)):
            if data:
                line = {"stream": stream, "data": data.decode("utf-8", "replace")}
                await response.write(json.dumps(line).encode() + b"\n")
        await response.write(json.dumps({"command": {**command, "exitCode": code}}).encode()
                             + b"\n")
        await response.write_eof()
        return response

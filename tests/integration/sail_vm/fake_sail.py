"""A local fake of Sail that the real ``sail`` SDK talks to.

The SDK's transport is compiled (a Rust extension), so what it serves was learned from the
requests that SDK 0.12.8 sends and from the errors its decoder reports on a wrong answer; it is
the wire as that SDK speaks it, not a published contract. All of it is JSON over HTTP/1.1 on one
port (``SAIL_API_URL``, ``SAILBOX_API_URL`` and ``SAILBOX_INGRESS_URL`` all point here):

* ``POST /v1/sailboxes`` (the devbox image only), ``GET /v1/sailboxes/{id}``,
  ``GET /v1/sailboxes?app=&search=&limit=&offset=`` (``{"data": [...], "total": n}``),
  ``POST /v1/sailboxes/{id}/terminate``;
* listeners: ``POST`` and ``GET /v1/sailboxes/{id}/listeners``; their URLs are
  ``<ingress>/_sailbox/{id}/{port}/...``, proxied to the port;
* files: ``PUT`` and ``GET /v1/sailboxes/{id}/files?path=...`` (raw bytes);
* exec: ``POST /v1/sailboxes/{id}/exec`` answers a stream of JSON lines typed ``started``,
  ``stdout``/``stderr`` (base64 ``data``, a ``seq`` per stream) and ``exit``;
  ``PUT /v1/sailboxes/{id}/exec/-/stdin?exec_request_id=&offset=&eof=`` feeds stdin.

Errors are ``{"error": {"message", "code"}}``. Faults a test can inject: ``create_faults``
(HTTP statuses for the next creates), ``create_delay`` and :meth:`vanish` (Sail ends a Sailbox
under a run). Sailboxes are real containers (:mod:`sandbox_containers`) with the host's Docker,
standing in for the devbox VM's own daemon.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
import time
from typing import Any

from aiohttp import web
from sandbox_containers import FakeCloudServer, SandboxContainers, get_file, put_file

API_KEY = "sk_agentenv_test"
BASE_IMAGE = "python:3.11-slim"
FAKE_LABEL = "agentenv.fake-sail"
BOX_PATH = re.compile(r"^/v1/sailboxes/(?P<id>[^/]+)(?P<rest>/.*)?$")
INGRESS_PATH = re.compile(r"^/_sailbox/(?P<id>[^/]+)/(?P<port>\d+)(?P<rest>/.*)?$")


def fake_env(fake: FakeSail) -> dict[str, str]:
    """The SDK's own endpoint settings pointing it at the fake."""
    return {"SAIL_API_URL": fake.url, "SAILBOX_API_URL": fake.url,
            "SAILBOX_INGRESS_URL": fake.url, "SAIL_IMAGEBUILDER_URL": fake.url}


def error(status: int, message: str, code: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": code}}, status=status)


class FakeSail(FakeCloudServer):
    """The fake service: the Sailbox API and data plane, Sailboxes and the faults to inject."""

    def __init__(self, docker_client: Any, *, api_key: str = API_KEY) -> None:
        super().__init__()
        self.containers = SandboxContainers(docker_client, FAKE_LABEL)
        self.api_key = api_key
        self.boxes: dict[str, dict[str, Any]] = {}
        self.execs: dict[str, asyncio.subprocess.Process] = {}
        self.stdin_offsets: dict[asyncio.subprocess.Process, int] = {}
        self.create_faults: list[int] = []
        self.create_delay = 0.0
        self.dropped_streams = 0  # exec streams the SDK closed before the command's exit

    async def close(self) -> None:
        for process in self.execs.values():
            if process.returncode is None:
                process.kill()
        for box_id in list(self.boxes):
            await asyncio.to_thread(self.containers.remove, box_id)

    def running(self) -> list[str]:
        return [i for i, b in self.boxes.items() if b["status"] == "running"]

    def vanish(self, box_id: str) -> None:
        """Sail ends the Sailbox on its own (its lifetime, the console)."""
        self.boxes[box_id]["status"] = "terminated"
        self.containers.remove(box_id)

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        box = self.boxes.get(sandbox_id)
        return box is not None and box["status"] == "running" and port in box["listeners"]

    @staticmethod
    def view(box: dict[str, Any]) -> dict[str, Any]:
        """A Sailbox as the API answers it (every field the SDK's decoder requires)."""
        return {"sailbox_id": box["id"], "name": box["name"], "status": box["status"],
                "app_id": box["app"], "app_name": box["app"], "image_id": "im_devbox",
                "memory_mib": box["memory_gib"] * 1024, "vcpu_count": box["vcpu"],
                "state_disk_size_gib": box["disk_gib"], "cpu_requested_vcpu": box["vcpu"],
                "cpu_used_vcpu": 0, "memory_requested_bytes": box["memory_gib"] << 30,
                "memory_used_bytes": 0, "disk_requested_bytes": box["disk_gib"] << 30,
                "disk_used_bytes": 0, "checkpoint_generation": 0, "volume_mounts": [],
                "created_at": box["created_at"], "updated_at": box["created_at"]}

    # -- the API --------------------------------------------------------------------------

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        ingress = INGRESS_PATH.match(request.path)
        if ingress:
            rest = (ingress["rest"] or "/") + (f"?{request.query_string}"
                                               if request.query_string else "")
            return await self._ingress(request, ingress["id"], int(ingress["port"]), rest)
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return error(401, "invalid API key", "unauthenticated")
        if request.path == "/v1/sailboxes":
            if request.method == "POST":
                return await self.create(json.loads(body))
            return self.listing(request)
        match = BOX_PATH.match(request.path)
        if match is None:
            return error(404, f"no route {request.method} {request.path}", "not_found")
        box = self.boxes.get(match["id"])
        if box is None:
            return error(404, f"Sailbox {match['id']} not found", "not_found")
        rest = match["rest"] or ""
        if rest == "" and request.method == "GET":
            return web.json_response(self.view(box))
        if rest == "/terminate" and request.method == "POST":
            if box["status"] == "running":
                box["status"] = "terminated"
                await asyncio.to_thread(self.containers.remove, box["id"])
            return web.json_response({})
        if box["status"] != "running":
            return error(409, f"Sailbox {box['id']} is {box['status']}", "failed_precondition")
        if rest == "/listeners":
            if request.method == "POST":
                port = int(json.loads(body)["guest_port"])
                box["listeners"].add(port)
                return web.json_response(self.listener(port))
            return web.json_response({"data": [self.listener(p)
                                               for p in sorted(box["listeners"])]})
        if rest == "/files":
            return await self.files(request, box, body)
        if rest == "/exec" and request.method == "POST":
            return await self.exec(request, box, json.loads(body))
        if rest == "/exec/-/stdin" and request.method == "PUT":
            return await self.stdin(request, body)
        return error(404, f"no route {request.method} {request.path}", "not_found")

    @staticmethod
    def listener(port: int) -> dict[str, Any]:
        return {"guest_port": port, "protocol": "http", "route_status": "unknown"}

    async def create(self, sent: dict[str, Any]) -> web.StreamResponse:
        if self.create_delay:
            await asyncio.sleep(self.create_delay)
        if self.create_faults:
            status = self.create_faults.pop(0)
            return error(status, {429: "rate limit exceeded", 402: "out of credit"}
                         .get(status, "refused"), {429: "resource_exhausted"}
                         .get(status, "failed_precondition"))
        if sent.get("image", {}).get("base") != "BASE_IMAGE_DEVBOX":
            return error(400, f"the fake Sail boots only the devbox image, not {sent['image']}",
                         "invalid_argument")
        if any(b["name"] == sent["name"] and b["status"] == "running"
               for b in self.boxes.values()):
            return error(409, f"a Sailbox named {sent['name']} exists", "already_exists")
        box_id = f"sb_{secrets.token_hex(8)}"
        vcpu = {"s": 1, "m": 4, "l": 8}[sent.get("size") or "s"]
        box = {"id": box_id, "name": sent["name"], "app": sent["app_id"], "status": "running",
               "vcpu": vcpu, "memory_gib": sent.get("memory_limit_gib") or 2,
               "disk_gib": sent.get("state_disk_limit_gib") or 8, "request": sent,
               "listeners": {p["guest_port"] for p in sent.get("ingress_ports") or []},
               "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "order": time.monotonic()}
        self.boxes[box_id] = box
        await asyncio.to_thread(self.containers.start, box_id, BASE_IMAGE, with_docker=True)
        return web.json_response(self.view(box))

    def listing(self, request: web.Request) -> web.Response:
        app, search = request.query.get("app"), request.query.get("search") or ""
        found = sorted((b for b in self.boxes.values()
                        if (not app or b["app"] == app) and search in b["name"]),
                       key=lambda b: -b["order"])
        offset, limit = int(request.query.get("offset", 0)), int(request.query.get("limit", 100))
        return web.json_response({"data": [self.view(b) for b in found[offset:offset + limit]],
                                  "total": len(found)})

    def _container(self, box: dict[str, Any]) -> Any:
        [container] = [c for c in self.containers.leftovers()
                       if c.labels.get(FAKE_LABEL) == box["id"]]
        return container

    async def files(self, request: web.Request, box: dict[str, Any],
                    body: bytes) -> web.StreamResponse:
        path = request.query["path"]
        container = await asyncio.to_thread(self._container, box)
        if request.method == "PUT":
            mode = int(request.query.get("mode", "420"))
            await asyncio.to_thread(put_file, container, path, body, mode)
            return web.json_response({"size_bytes": len(body)})
        data = await asyncio.to_thread(get_file, container, path)
        if data is None:
            return error(404, f"{path}: no such file", "not_found")
        return web.Response(body=data, content_type="application/octet-stream")

    async def exec(self, request: web.Request, box: dict[str, Any],
                   sent: dict[str, Any]) -> web.StreamResponse:
        argv = ["docker", "exec", *(["-i"] if sent.get("open_stdin") else [])]
        for key, value in (sent.get("env") or {}).items():
            argv += ["-e", f"{key}={value}"]
        container = f"{FAKE_LABEL.replace('.', '-')}-{box['id']}"
        process = await asyncio.create_subprocess_exec(
            *argv, container, *sent["command"],
            stdin=asyncio.subprocess.PIPE if sent.get("open_stdin")
            else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        exec_id = f"ex_{secrets.token_hex(8)}"
        self.execs[exec_id] = process
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        seqs = {"stdout": 0, "stderr": 0}
        totals = {"stdout": 0, "stderr": 0}

        async def pump(source: asyncio.StreamReader, stream: str) -> None:
            while chunk := await source.read(65536):
                seqs[stream] += 1
                totals[stream] += len(chunk)
                await lines.put({"type": stream, "data": base64.b64encode(chunk).decode(),
                                 "seq": seqs[stream]})

        await response.write(json.dumps({"type": "started", "exec_request_id": exec_id})
                             .encode() + b"\n")
        assert process.stdout is not None and process.stderr is not None
        pumps = asyncio.gather(pump(process.stdout, "stdout"), pump(process.stderr, "stderr"))
        pumps.add_done_callback(lambda _: lines.put_nowait(None))
        try:
            while (line := await lines.get()) is not None:
                await response.write(json.dumps(line).encode() + b"\n")
            code = await process.wait()
            await response.write(json.dumps({
                "type": "exit", "return_code": code, "stdout_seq": seqs["stdout"],
                "stderr_seq": seqs["stderr"], "stdout_total_bytes": totals["stdout"],
                "stderr_total_bytes": totals["stderr"]}).encode() + b"\n")
            await response.write_eof()
        except ConnectionResetError:  # the client let the stream go; the command runs on
            self.dropped_streams += 1
        return response

    async def stdin(self, request: web.Request, body: bytes) -> web.Response:
        process = self.execs.get(request.query.get("exec_request_id", ""))
        if process is None or process.stdin is None:
            return error(404, "no such exec", "not_found")
        offset = int(request.query.get("offset", 0))
        accepted = self.stdin_offsets.get(process, 0)
        fresh = body[max(0, accepted - offset):]  # bytes sent again after a retry, once
        if fresh and not process.stdin.is_closing():
            process.stdin.write(fresh)
            await process.stdin.drain()
        self.stdin_offsets[process] = max(accepted, offset + len(body))
        if request.query.get("eof") == "true" and not process.stdin.is_closing():
            process.stdin.close()
        return web.json_response({"accepted_through": offset + len(body)})

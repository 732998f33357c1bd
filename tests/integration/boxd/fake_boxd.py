"""A local fake of boxd that the real ``boxd`` SDK talks to.

What it serves (learned from the SDK: ``boxd._transport``, ``boxd._credentials`` and
``boxd.resources.machines``), all on one port as boxd's local build does:

* the API-key exchange, ``POST /api/v1/auth/token`` (aiohttp): a key in, a bearer token out;
* the gRPC API, answered by a subclass of the SDK's own generated ``BoxdApiServicer``:
  ``CreateVm``, ``CreateVmFromSnapshot`` (one snapshot, ``SNAPSHOT``), ``SetDeleteAfter``,
  ``GetVm``, ``ListVms`` (label selector), ``DestroyVm``,
  ``Exec`` (a bidirectional stream; the command runs through a shell), ``UploadFileStream``,
  ``DownloadFileStream``, ``CreateProxy`` and ``ListProxies``; everything else answers
  ``unimplemented``, as the generated base does;
* proxy domains, ``<port>-<id>.localhost:<port of the fake>``, proxied to the port.

The one port is a small front that sends HTTP/2 (gRPC) to the gRPC server and anything else
to aiohttp. Faults a test can inject: ``create_faults`` (status codes for the next creates),
``create_delay``, ``unreachable`` (machine ids whose calls answer ``unavailable``) and
:meth:`vanish` (boxd deletes a machine under a run). Machines are real containers
(:mod:`sandbox_containers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from aiohttp import web
from boxd._generated import api_pb2, api_pb2_grpc
from sandbox_containers import FakeCloudServer, SandboxContainers, get_file, put_file

API_KEY = "bxd_test_key"
BASE_IMAGE = "python:3.11-slim"
SNAPSHOT = "agentenv-warm"
FAKE_LABEL = "agentenv.fake-boxd"


def fake_settings(fake: FakeBoxd, **more: Any) -> dict[str, Any]:
    """The provider's config for the fake (a plain-http boxd, as its local build is)."""
    return {"api_key": API_KEY, "base_url": fake.base_url, **more}


class FakeBoxd(FakeCloudServer):
    """The fake service: key exchange, gRPC API, machines and the faults to inject."""

    def __init__(self, docker_client: Any, *, api_key: str = API_KEY) -> None:
        super().__init__()
        self.containers = SandboxContainers(docker_client, FAKE_LABEL)
        self.docker = docker_client
        self.api_key = api_key
        self.token = f"jwt-{secrets.token_hex(8)}"
        self.machines: dict[str, dict[str, Any]] = {}
        self.create_faults: list[grpc.StatusCode] = []
        self.create_delay = 0.0
        self.unreachable: set[str] = set()
        self.rpcs: list[tuple[str, Any]] = []  # (method, request) of every gRPC call
        self.front_port = 0
        self._grpc: grpc.aio.Server | None = None
        self._grpc_port = 0
        self._front: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.front_port}"

    def called(self, method: str) -> list[Any]:
        return [request for name, request in self.rpcs if name == method]

    def start(self) -> str:
        super().start()
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._serve_grpc(), self._loop).result(30)
        return self.base_url

    async def _serve_grpc(self) -> None:
        self._grpc = grpc.aio.server()
        api_pb2_grpc.add_BoxdApiServicer_to_server(FakeBoxdApi(self), self._grpc)
        self._grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        await self._grpc.start()
        self._front = await asyncio.start_server(self._route, "127.0.0.1", 0)
        self.front_port = self._front.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._front is not None:
            self._front.close()
        if self._grpc is not None:
            await self._grpc.stop(0)
        for machine_id in list(self.machines):
            await asyncio.to_thread(self._remove, machine_id)

    async def _route(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: HTTP/2 (its preface starts ``PRI``) to gRPC, the rest to aiohttp."""
        first = await reader.read(3)
        port = self._grpc_port if first == b"PRI" else self.port
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        up_writer.write(first)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            with contextlib.suppress(OSError):
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        record = self.machines.get(sandbox_id)
        return record is not None and port in record["proxies"].values()

    def vanish(self, machine_id: str) -> None:
        """boxd deletes the machine on its own (its timer, out of credit)."""
        self._remove(machine_id)

    def _remove(self, machine_id: str) -> None:
        self.machines.pop(machine_id, None)
        self.containers.remove(machine_id)

    def find(self, ref: str) -> str | None:
        if ref in self.machines:
            return ref
        return next((i for i, r in self.machines.items() if r["name"] == ref), None)

    # -- the key exchange (HTTP) -----------------------------------------------------------

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if request.path == "/api/v1/auth/token" and request.method == "POST":
            if (json.loads(body or b"{}")).get("api_key") != self.api_key:
                return web.json_response({"error": "invalid API key"}, status=401)
            return web.json_response({"token": self.token, "expires_at": time.time() + 3600})
        return web.json_response({"error": f"no route {request.path}"}, status=404)


class FakeBoxdApi(api_pb2_grpc.BoxdApiServicer):
    """The gRPC methods the provider uses, on real containers."""

    def __init__(self, fake: FakeBoxd) -> None:
        self.fake = fake

    async def _check(self, method: str, request: Any, context: Any, machine: str = "") -> str:
        """Record the call, check the token, and resolve ``machine`` (id or name)."""
        self.fake.rpcs.append((method, request))
        metadata = dict(context.invocation_metadata() or ())
        if metadata.get("authorization") != f"Bearer {self.fake.token}":
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid token")
        if not machine:
            return ""
        found = self.fake.find(machine)
        if found in self.fake.unreachable:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "machine not reachable")
        if found is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"machine {machine} not found")
        return str(found)

    def _info(self, machine_id: str) -> Any:
        r = self.fake.machines[machine_id]
        return api_pb2.GetVmResponse(
            vm_id=machine_id, name=r["name"], status="running", vcpu=r["vcpu"],
            memory_bytes=r["memory_bytes"], disk_bytes=100 << 30, isolated=r["isolated"],
            labels=r["labels"], image_ref=r["image_ref"])

    async def CreateVmFromSnapshot(self, request: Any, context: Any) -> Any:
        if request.snapshot != SNAPSHOT:
            self.fake.rpcs.append(("CreateVmFromSnapshot", request))
            await context.abort(grpc.StatusCode.NOT_FOUND, f"snapshot {request.snapshot} "
                                "not found")
        return await self.CreateVm(request, context, method="CreateVmFromSnapshot")

    async def CreateVm(self, request: Any, context: Any,
                       method: str = "CreateVm") -> Any:
        await self._check(method, request, context)
        if self.fake.create_faults:
            await context.abort(self.fake.create_faults.pop(0), "injected by the test")
        if self.fake.find(request.name) is not None:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f"{request.name} is taken")
        machine_id = "vm" + secrets.token_hex(8)
        container = await asyncio.to_thread(self.fake.containers.start, machine_id,
                                            BASE_IMAGE, with_docker=True)
        self.fake.machines[machine_id] = {
            "container": container, "name": request.name or machine_id,
            "labels": dict(request.labels), "vcpu": request.config.vcpu or 1,
            "memory_bytes": request.config.memory_bytes or 4 << 30,
            "isolated": request.isolated,
            "image_ref": getattr(request, "image_ref", "") or "boxd/ubuntu",
            "proxies": {}, "delete_after": None,
        }
        await asyncio.sleep(self.fake.create_delay)
        return api_pb2.CreateVmResponse(vm_id=machine_id, name=request.name, status="running")

    async def SetDeleteAfter(self, request: Any, context: Any) -> Any:
        machine_id = await self._check("SetDeleteAfter", request, context, request.vm_id)
        self.fake.machines[machine_id]["delete_after"] = request.delete_after_secs
        return api_pb2.SetDeleteAfterResponse(
            delete_at_ms=int((time.time() + request.delete_after_secs) * 1000))

    async def GetVm(self, request: Any, context: Any) -> Any:
        return self._info(await self._check("GetVm", request, context, request.vm_id))

    async def ListVms(self, request: Any, context: Any) -> Any:
        await self._check("ListVms", request, context)
        wanted = dict(s.split("=", 1) for s in request.label_selector if "=" in s)
        return api_pb2.ListVmsResponse(vms=[
            self._info(i) for i, r in self.fake.machines.items()
            if all(r["labels"].get(k) == v for k, v in wanted.items())])

    async def DestroyVm(self, request: Any, context: Any) -> Any:
        machine_id = await self._check("DestroyVm", request, context, request.vm_id)
        await asyncio.to_thread(self.fake._remove, machine_id)
        return api_pb2.DestroyVmResponse()

    async def Exec(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        first = None
        async for chunk in request_iterator:
            first = chunk
            break
        assert first is not None
        machine_id = await self._check("Exec", first, context, first.vm_id)
        container = self.fake.machines[machine_id]["container"]
        code, (out, err) = await asyncio.to_thread(
            container.exec_run, ["sh", "-c", first.command], demux=True)
        if out:
            yield api_pb2.ExecChunk(data=out)
        if err:
            yield api_pb2.ExecChunk(data=err, is_stderr=True)
        yield api_pb2.ExecChunk(exit_code=code)

    async def UploadFileStream(self, request_iterator: Any, context: Any) -> Any:
        data, first = bytearray(), None
        async for chunk in request_iterator:
            first = first or chunk
            data += chunk.data
        assert first is not None
        machine_id = await self._check("UploadFileStream", first, context, first.vm_id)
        await asyncio.to_thread(put_file, self.fake.machines[machine_id]["container"],
                                first.path, bytes(data))
        return api_pb2.UploadFileResponse(bytes_written=len(data))

    async def DownloadFileStream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        machine_id = await self._check("DownloadFileStream", request, context, request.vm_id)
        data = await asyncio.to_thread(get_file, self.fake.machines[machine_id]["container"],
                                       request.path)
        if data is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"{request.path}: no such file")
        assert data is not None
        yield api_pb2.DownloadFileChunk(total_size=len(data), data=data)

    async def CreateProxy(self, request: Any, context: Any) -> Any:
        machine_id = await self._check("CreateProxy", request, context, request.vm)
        proxies = self.fake.machines[machine_id]["proxies"]
        if request.name in proxies:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f"{request.name} exists")
        proxies[request.name] = request.port
        return api_pb2.CreateProxyResponse(name=request.name, port=request.port)

    async def ListProxies(self, request: Any, context: Any) -> Any:
        machine_id = await self._check("ListProxies", request, context, request.vm)
        record = self.fake.machines[machine_id]
        return api_pb2.ListProxiesResponse(proxies=[
            api_pb2.ProxyInfo(name=name, vm_name=record["name"], vm_id=machine_id, port=port,
                              effective_port=port,
                              domain=f"{port}-{machine_id}.localhost:{self.fake.front_port}")
            for name, port in record["proxies"].items()])

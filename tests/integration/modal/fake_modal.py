"""A local fake of Modal that the real ``modal`` SDK talks to.

What it serves (learned from the SDK 1.6: ``modal.client``, ``modal.sandbox._impl_v2`` and
``modal.sandbox._task_command_router_client``), as two grpclib servers answering the SDK's own
generated service bases:

* the control plane (``ModalClientBase``): ``ClientHello``, ``AuthTokenGet``,
  ``EnvironmentGetOrCreate``, ``AppGetOrCreate``, ``ImageGetOrCreate`` (an image is a
  ``FROM`` of a registry reference; build steps are recorded and refused, as the fake builds
  nothing), ``SandboxCreateV2``, ``SandboxGetCommandRouterAccess``, ``SandboxWaitV2``,
  ``SandboxGetTunnelsV2``, ``SandboxTagsGetV2``, ``SandboxListV2``, ``SandboxTerminateV2``;
  and for the SDK's V1 sandboxes (what it makes for a GPU) ``SandboxCreate``,
  ``SecretGetOrCreate`` (V1 sends env as a secret), ``SandboxGetTaskId``,
  ``TaskGetCommandRouterAccess`` and the V1 twins of wait, tunnels, tags and terminate;
* the task command router (``TaskCommandRouterBase``), reached with the JWT the control plane
  hands out: ``TaskExecStart`` (``docker exec`` in the sandbox's container), ``TaskExecStdioRead``
  (from an offset, streamed), ``TaskExecStdinWrite``, ``TaskExecWait`` and ``TaskExecPoll``;

and every other method answers ``UNIMPLEMENTED`` (and is recorded in ``unimplemented``, which
the fixture checks is empty). Tunnels are
``<port>-<id>.localhost:<port of the fake's HTTP side>``, proxied to the port.

Faults a test can inject: ``create_faults`` (gRPC statuses for the next creates),
``fail_after_make`` (statuses for the next creates, answered after the sandbox is made),
``vanish_on`` (Modal ends the sandbox when an exec whose arguments contain it arrives),
``create_delay`` and :meth:`vanish` (Modal ends a sandbox under a run). Sandboxes are real
containers (:mod:`sandbox_containers`); a VM sandbox gets the host's Docker, standing in for
the daemon inside a Modal VM.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import secrets
import time
from typing import Any

from aiohttp import web
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server, Stream
from modal_proto import api_grpc, api_pb2
from modal_proto import task_command_router_grpc as router_grpc
from modal_proto import task_command_router_pb2 as router_pb2
from sandbox_containers import FakeCloudServer, SandboxContainers

TOKEN_ID = "ak-agentenv-test"
TOKEN_SECRET = "as-agentenv-test"
BASE_IMAGE = "python:3.11-slim"
FAKE_LABEL = "agentenv.fake-modal"
SUCCESS = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)
TERMINATED = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
STDOUT = router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT


def fake_env(fake: FakeModal) -> dict[str, str]:
    """The SDK's own settings pointing it at the fake (the provider reads them from the
    environment, as it does for the real service)."""
    return {"MODAL_SERVER_URL": fake.server_url, "MODAL_TOKEN_ID": TOKEN_ID,
            "MODAL_TOKEN_SECRET": TOKEN_SECRET}


def _jwt() -> str:
    """A token the SDK can read its expiry from (it refreshes before ``exp``)."""
    claims = base64.urlsafe_b64encode(json.dumps({"exp": time.time() + 3600}).encode())
    return f"e30.{claims.decode().rstrip('=')}.fake"


def _inline_env(sources: Any) -> dict[str, str]:
    """The variables the SDK sends inline (its ``env=`` dict, as an ephemeral secret)."""
    env: dict[str, str] = {}
    for source in sources:
        env.update(source.env.contents)
    return env


def _complete(base: type, impl: type) -> type:
    """``impl`` plus ``UNIMPLEMENTED`` for every other method of the generated ``base``."""
    missing: dict[str, Any] = {}
    for name, member in inspect.getmembers(base, inspect.isfunction):
        if getattr(member, "__isabstractmethod__", False) and name not in vars(impl):
            async def unimplemented(self: Any, stream: Stream, _name: str = name) -> None:
                self.fake.unimplemented.append(_name)
                raise GRPCError(Status.UNIMPLEMENTED, f"the fake Modal has no {_name}")
            missing[name] = unimplemented
    return type(impl.__name__, (impl, base), missing)


class Exec:
    """One process started through the command router, its output kept for re-reads."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.output = {STDOUT: bytearray(), 2: bytearray()}
        self.closed = {STDOUT: asyncio.Event(), 2: asyncio.Event()}
        self.grew = asyncio.Event()
        self.stdin_offset = 0
        assert process.stdout is not None and process.stderr is not None
        self.readers = [asyncio.ensure_future(self._pump(process.stdout, STDOUT)),
                        asyncio.ensure_future(self._pump(process.stderr, 2))]

    async def _pump(self, source: asyncio.StreamReader, fd: int) -> None:
        while chunk := await source.read(65536):
            self.output[fd] += chunk
            self.grew.set()
        self.closed[fd].set()
        self.grew.set()


class FakeModal(FakeCloudServer):
    """The fake service: the two gRPC services, sandboxes and the faults to inject."""

    def __init__(self, docker_client: Any) -> None:
        super().__init__()
        self.containers = SandboxContainers(docker_client, FAKE_LABEL)
        self.docker = docker_client
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.images: dict[str, api_pb2.Image] = {}
        self.secrets: dict[str, dict[str, str]] = {}
        self.apps: dict[str, str] = {}
        self.execs: dict[str, Exec] = {}
        self.create_faults: list[Status] = []
        self.create_delay = 0.0
        self.fail_after_make: list[Status] = []
        self.vanish_on = ""  # Modal ends the sandbox when an exec naming this arrives
        self.rpcs: list[tuple[str, Any]] = []  # (method, request) of every gRPC call
        self.unimplemented: list[str] = []
        self.router_jwt = _jwt()
        self.api_port = 0
        self.router_port = 0
        self._servers: list[Server] = []

    @property
    def server_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def called(self, method: str) -> list[Any]:
        return [request for name, request in self.rpcs if name == method]

    def start(self) -> str:
        super().start()
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._serve_grpc(), self._loop).result(30)
        return self.server_url

    async def _serve_grpc(self) -> None:
        api = _complete(api_grpc.ModalClientBase, ControlPlane)(self)
        router = _complete(router_grpc.TaskCommandRouterBase, CommandRouter)(self)
        for handler in (api, router):
            server = Server([handler])
            await server.start("127.0.0.1", 0)
            self._servers.append(server)
        self.api_port, self.router_port = (s._server.sockets[0].getsockname()[1]  # type: ignore
                                           for s in self._servers)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
            await server.wait_closed()
        for run in self.execs.values():
            if run.process.returncode is None:
                run.process.kill()
        await asyncio.to_thread(self._remove_all)

    def _remove_all(self) -> None:
        for sandbox_id in list(self.sandboxes):
            self.containers.remove(sandbox_id)

    # -- what tests look at and do ---------------------------------------------------------

    def running(self) -> list[str]:
        return [i for i, s in self.sandboxes.items() if s["state"] == "running"]

    def vanish(self, sandbox_id: str) -> None:
        """Modal ends the sandbox (its timeout, or the console), under whoever uses it."""
        self.sandboxes[sandbox_id]["state"] = "terminated"
        self.containers.remove(sandbox_id)

    def ingress_open(self, sandbox_id: str, port: int) -> bool:
        record = self.sandboxes.get(sandbox_id)
        return record is not None and record["state"] == "running" and port in record["ports"]

    async def handle(self, request: web.Request, body: bytes) -> web.StreamResponse:
        return web.Response(status=404, text="the fake Modal speaks gRPC on its other ports")

    # -- the sandboxes -----------------------------------------------------------------------

    async def make_sandbox(self, request: Any, *, v1: bool = False) -> dict[str, Any]:
        definition = request.definition
        image = self.images.get(definition.image_id)
        if image is None:
            raise GRPCError(Status.NOT_FOUND, f"no image {definition.image_id}")
        reference = image.dockerfile_commands[0].split(maxsplit=1)[1]
        vm = definition.experimental_options_v2.get("vm_runtime") == "True"
        # the SDK tells V1 from V2 by the id's shape: "sb-" and 22 letters or digits is V1
        sandbox_id = f"sb-{secrets.token_hex(11)}" if v1 else f"sb-{secrets.token_hex(10)}"
        ports = [p.port for p in definition.open_ports.ports]
        env = self.secret_env(definition.secret_ids) if v1 else \
            _inline_env(request.secret_sources)
        record = {
            "id": sandbox_id, "image": reference, "version": 1 if v1 else 2,
            "task_id": f"ta-{secrets.token_hex(10)}{'' if v1 else 'V'}",
            "gpu": definition.resources.gpu_config.gpu_type,
            "vm": vm, "ports": ports, "state": "running", "app_id": request.app_id,
            "tags": {t.tag_name: t.tag_value for t in request.tags}, "env": env,
            "block_network": definition.block_network, "created_at": time.time(),
            "cpu": definition.resources.milli_cpu, "memory": definition.resources.memory_mb,
            "timeout": definition.timeout_secs,
        }
        self.sandboxes[sandbox_id] = record
        await asyncio.to_thread(self.containers.start, sandbox_id, reference, with_docker=vm,
                                env=env)
        return record

    def secret_env(self, secret_ids: Any) -> dict[str, str]:
        env: dict[str, str] = {}
        for secret_id in secret_ids:
            env.update(self.secrets.get(secret_id, {}))
        return env

    def tunnels(self, record: dict[str, Any]) -> list[api_pb2.TunnelData]:
        return [api_pb2.TunnelData(host=f"{port}-{record['id']}.localhost", port=self.port,
                                   container_port=port) for port in record["ports"]]

    def sandbox(self, sandbox_id: str) -> dict[str, Any]:
        record = self.sandboxes.get(sandbox_id)
        if record is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox with id {sandbox_id} not found")
        return record

    def by_task(self, task_id: str) -> dict[str, Any]:
        for record in self.sandboxes.values():
            if record["task_id"] == task_id:
                if record["state"] != "running":
                    raise GRPCError(Status.NOT_FOUND, f"task {task_id} has finished")
                return record
        raise GRPCError(Status.NOT_FOUND, f"no task {task_id}")


class ControlPlane:
    """Modal's API: credentials on every call, as the SDK sends them."""

    def __init__(self, fake: FakeModal) -> None:
        self.fake = fake

    async def _request(self, stream: Stream, method: str) -> Any:
        request = await stream.recv_message()
        self.fake.rpcs.append((method, request))
        metadata = dict(stream.metadata or {})
        if (metadata.get("x-modal-token-id"), metadata.get("x-modal-token-secret")) != \
                (TOKEN_ID, TOKEN_SECRET):
            raise GRPCError(Status.UNAUTHENTICATED, "Invalid token id or secret")
        return request

    async def ClientHello(self, stream: Stream) -> None:
        await self._request(stream, "ClientHello")
        await stream.send_message(api_pb2.ClientHelloResponse())

    async def AuthTokenGet(self, stream: Stream) -> None:
        await self._request(stream, "AuthTokenGet")
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=_jwt()))

    async def EnvironmentGetOrCreate(self, stream: Stream) -> None:
        request = await self._request(stream, "EnvironmentGetOrCreate")
        await stream.send_message(api_pb2.EnvironmentGetOrCreateResponse(
            environment_id="en-fake", metadata=api_pb2.EnvironmentMetadata(
                name=request.deployment_name or "main",
                settings=api_pb2.EnvironmentSettings(image_builder_version="2025.06"))))

    async def AppGetOrCreate(self, stream: Stream) -> None:
        request = await self._request(stream, "AppGetOrCreate")
        app_id = self.fake.apps.setdefault(request.app_name, f"ap-{secrets.token_hex(8)}")
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id))

    async def ImageGetOrCreate(self, stream: Stream) -> None:
        request = await self._request(stream, "ImageGetOrCreate")
        commands = list(request.image.dockerfile_commands)
        if len(commands) != 1 or not commands[0].startswith("FROM "):
            raise GRPCError(Status.FAILED_PRECONDITION,
                            f"the fake Modal builds no images: {commands}")
        reference = commands[0].split(maxsplit=1)[1]
        if not await asyncio.to_thread(self._local, reference):
            raise GRPCError(Status.NOT_FOUND, f"image {reference} not found in its registry")
        image_id = f"im-{secrets.token_hex(8)}"
        self.fake.images[image_id] = request.image
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(image_id=image_id,
                                                                   result=SUCCESS))

    def _local(self, reference: str) -> bool:
        import docker.errors

        try:
            self.fake.docker.images.get(reference)
        except docker.errors.ImageNotFound:
            return False
        return True

    async def SandboxCreate(self, stream: Stream) -> None:
        """V1: the SDK then polls ``SandboxGetTaskId`` and asks the router by task id."""
        request = await self._request(stream, "SandboxCreate")
        record = await self.fake.make_sandbox(request, v1=True)
        await stream.send_message(api_pb2.SandboxCreateResponse(
            sandbox_id=record["id"],
            metadata=api_pb2.SandboxHandleMetadata(app_id=record["app_id"])))

    async def TaskGetCommandRouterAccess(self, stream: Stream) -> None:
        request = await self._request(stream, "TaskGetCommandRouterAccess")
        self.fake.by_task(request.task_id)
        access = self._access()
        await stream.send_message(api_pb2.TaskGetCommandRouterAccessResponse(
            url=access.url, jwt=access.jwt))

    async def SecretGetOrCreate(self, stream: Stream) -> None:
        """V1 sandboxes reference their env as a secret made first."""
        request = await self._request(stream, "SecretGetOrCreate")
        secret_id = f"st-{secrets.token_hex(8)}"
        self.fake.secrets[secret_id] = dict(request.env_dict)
        await stream.send_message(api_pb2.SecretGetOrCreateResponse(secret_id=secret_id))

    async def SandboxCreateV2(self, stream: Stream) -> None:
        request = await self._request(stream, "SandboxCreateV2")
        if self.fake.create_delay:
            await asyncio.sleep(self.fake.create_delay)
        if self.fake.create_faults:
            status = self.fake.create_faults.pop(0)
            raise GRPCError(status, {Status.RESOURCE_EXHAUSTED: "Sandbox quota exceeded"}
                            .get(status, status.name))
        record = await self.fake.make_sandbox(request)
        if self.fake.fail_after_make:  # made, then the API failed before it answered
            raise GRPCError(self.fake.fail_after_make.pop(0), "the API failed mid-create")
        await stream.send_message(api_pb2.SandboxCreateV2Response(
            sandbox_id=record["id"], task_id=record["task_id"],
            tunnels=self.fake.tunnels(record),
            command_router_access=self._access()))

    def _access(self) -> api_pb2.CommandRouterAccess:
        return api_pb2.CommandRouterAccess(url=f"http://127.0.0.1:{self.fake.router_port}",
                                           jwt=self.fake.router_jwt)

    async def SandboxGetCommandRouterAccess(self, stream: Stream) -> None:
        await self._request(stream, "SandboxGetCommandRouterAccess")
        access = self._access()
        await stream.send_message(api_pb2.SandboxGetCommandRouterAccessResponse(
            url=access.url, jwt=access.jwt))

    async def SandboxGetTaskIdV2(self, stream: Stream) -> None:
        await self._sandbox_get_task_id(stream, "SandboxGetTaskIdV2")

    async def SandboxGetTaskId(self, stream: Stream) -> None:  # V1 (the SDK uses it for a GPU)
        await self._sandbox_get_task_id(stream, "SandboxGetTaskId")

    async def _sandbox_get_task_id(self, stream: Stream, method: str) -> None:
        request = await self._request(stream, method)
        record = self.fake.sandbox(request.sandbox_id)
        await stream.send_message(api_pb2.SandboxGetTaskIdResponse(task_id=record["task_id"]))

    async def SandboxWaitV2(self, stream: Stream) -> None:
        await self._sandbox_wait(stream, "SandboxWaitV2")

    async def SandboxWait(self, stream: Stream) -> None:  # V1 (the SDK uses it for a GPU)
        await self._sandbox_wait(stream, "SandboxWait")

    async def _sandbox_wait(self, stream: Stream, method: str) -> None:
        request = await self._request(stream, method)
        record = self.fake.sandbox(request.sandbox_id)
        done = record["state"] != "running"
        await stream.send_message(api_pb2.SandboxWaitResponse(
            result=TERMINATED if done else None,
            metadata=api_pb2.SandboxHandleMetadata(app_id=record["app_id"])))

    async def SandboxGetTunnelsV2(self, stream: Stream) -> None:
        await self._sandbox_get_tunnels(stream, "SandboxGetTunnelsV2")

    async def SandboxGetTunnels(self, stream: Stream) -> None:  # V1 (the SDK uses it for a GPU)
        await self._sandbox_get_tunnels(stream, "SandboxGetTunnels")

    async def _sandbox_get_tunnels(self, stream: Stream, method: str) -> None:
        request = await self._request(stream, method)
        record = self.fake.sandbox(request.sandbox_id)
        await stream.send_message(api_pb2.SandboxGetTunnelsResponse(
            result=SUCCESS, tunnels=self.fake.tunnels(record)))

    async def SandboxTagsGetV2(self, stream: Stream) -> None:
        await self._sandbox_tags_get(stream, "SandboxTagsGetV2")

    async def SandboxTagsGet(self, stream: Stream) -> None:  # V1 (the SDK uses it for a GPU)
        await self._sandbox_tags_get(stream, "SandboxTagsGet")

    async def _sandbox_tags_get(self, stream: Stream, method: str) -> None:
        request = await self._request(stream, method)
        record = self.fake.sandbox(request.sandbox_id)
        await stream.send_message(api_pb2.SandboxTagsGetResponse(tags=[
            api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in record["tags"].items()]))

    async def SandboxListV2(self, stream: Stream) -> None:
        request = await self._request(stream, "SandboxListV2")
        wanted = {t.tag_name: t.tag_value for t in request.tags}
        found = [r for r in self.fake.sandboxes.values()
                 if r["state"] == "running" and (not request.app_id or
                                                 r["app_id"] == request.app_id)
                 and all(r["tags"].get(k) == v for k, v in wanted.items())
                 and (not request.before_timestamp or r["created_at"] <
                      request.before_timestamp)]
        found.sort(key=lambda r: -r["created_at"])
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=[
            api_pb2.SandboxInfo(id=r["id"], created_at=r["created_at"], app_id=r["app_id"],
                                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v)
                                      for k, v in r["tags"].items()],
                                metadata=api_pb2.SandboxHandleMetadata(app_id=r["app_id"]))
            for r in found]))

    async def SandboxTerminateV2(self, stream: Stream) -> None:
        await self._sandbox_terminate(stream, "SandboxTerminateV2")

    async def SandboxTerminate(self, stream: Stream) -> None:  # V1 (the SDK uses it for a GPU)
        await self._sandbox_terminate(stream, "SandboxTerminate")

    async def _sandbox_terminate(self, stream: Stream, method: str) -> None:
        request = await self._request(stream, method)
        record = self.fake.sandbox(request.sandbox_id)
        if record["state"] == "running":
            record["state"] = "terminated"
            await asyncio.to_thread(self.fake.containers.remove, record["id"])
        await stream.send_message(api_pb2.SandboxTerminateResponse())


class CommandRouter:
    """The per-task command router: processes in a sandbox, over a bearer JWT."""

    def __init__(self, fake: FakeModal) -> None:
        self.fake = fake

    async def _request(self, stream: Stream, method: str) -> Any:
        request = await stream.recv_message()
        self.fake.rpcs.append((method, request))
        if dict(stream.metadata or {}).get("authorization") != f"Bearer {self.fake.router_jwt}":
            raise GRPCError(Status.UNAUTHENTICATED, "bad or missing JWT")
        return request

    def _exec(self, exec_id: str) -> Exec:
        run = self.fake.execs.get(exec_id)
        if run is None:
            raise GRPCError(Status.NOT_FOUND, f"no exec {exec_id}")
        return run

    async def TaskExecStart(self, stream: Stream) -> None:
        request = await self._request(stream, "TaskExecStart")
        record = self.fake.by_task(request.task_id)
        if self.fake.vanish_on and any(self.fake.vanish_on in a for a in request.command_args):
            await asyncio.to_thread(self.fake.vanish, record["id"])  # ended as this arrives
            raise GRPCError(Status.NOT_FOUND, f"task {request.task_id} has finished")
        argv = ["docker", "exec", "-i"]
        if request.workdir:
            argv += ["-w", request.workdir]
        env = {**self.fake.secret_env(request.secret_ids), **_inline_env(request.secret_sources)}
        for key, value in env.items():
            argv += ["-e", f"{key}={value}"]
        container = f"{FAKE_LABEL.replace('.', '-')}-{record['id']}"
        process = await asyncio.create_subprocess_exec(
            *argv, container, *request.command_args, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        self.fake.execs[request.exec_id] = Exec(process)
        await stream.send_message(router_pb2.TaskExecStartResponse())

    async def TaskExecStdinWrite(self, stream: Stream) -> None:
        request = await self._request(stream, "TaskExecStdinWrite")
        run = self._exec(request.exec_id)
        stdin = run.process.stdin
        assert stdin is not None
        fresh = request.data[max(0, run.stdin_offset - request.offset):]  # resent bytes once
        if fresh and not stdin.is_closing():
            stdin.write(fresh)
            await stdin.drain()
        run.stdin_offset = max(run.stdin_offset, request.offset + len(request.data))
        if request.eof and not stdin.is_closing():
            stdin.close()
        await stream.send_message(router_pb2.TaskExecStdinWriteResponse())

    async def TaskExecStdioRead(self, stream: Stream) -> None:
        request = await self._request(stream, "TaskExecStdioRead")
        run = self._exec(request.exec_id)
        fd = STDOUT if request.file_descriptor == STDOUT else 2
        offset = request.offset
        while True:
            data = bytes(run.output[fd][offset:])
            if data:
                offset += len(data)
                await stream.send_message(router_pb2.TaskExecStdioReadResponse(data=data))
                continue
            if run.closed[fd].is_set():
                return
            run.grew.clear()
            await run.grew.wait()

    async def TaskExecWait(self, stream: Stream) -> None:
        request = await self._request(stream, "TaskExecWait")
        run = self._exec(request.exec_id)
        code = await run.process.wait()
        await stream.send_message(router_pb2.TaskExecWaitResponse(code=code))

    async def TaskExecPoll(self, stream: Stream) -> None:
        request = await self._request(stream, "TaskExecPoll")
        code = self._exec(request.exec_id).process.returncode
        await stream.send_message(router_pb2.TaskExecPollResponse() if code is None
                                  else router_pb2.TaskExecPollResponse(code=code))

"""A fake Tenki service behind the SDK's own transport seam (``tenki.Client(rpc=...)``).

Tenki's API is gRPC, split into a control plane (sessions, ports) and a per-session data plane
(run, files). The SDK reaches both through transport objects whose methods take and return its
protobuf messages; :class:`FakeTenkiRPC` is both, so everything above them (``Client``,
``Sandbox``, ``Process``, ``SandboxFS``, the message converters and error mapping) is the real
SDK. It records every call in ``calls`` and answers as the service would: sessions are real
containers on the local Docker engine (host networking; the host's Docker socket and CLI for
sessions made from a snapshot with Docker), preview URLs are ``http://127.0.0.1:<port>``, and
errors are raised as the Connect errors the SDK maps (``not_found``, ...).
"""

from __future__ import annotations

import queue
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

from sandbox_containers import SandboxContainers, get_file, put_file

API_KEY = "tk_test_key"
BASE_IMAGE = "python:3.11-slim"
DOCKER_SNAPSHOT = "snap-with-docker"
FAKE_LABEL = "agentenv.fake-tenki"
KEEP_ALIVE = ["/bin/sh", "-c", "while :; do sleep 3600; done"]


def _error(code: str, message: str) -> Exception:
    from tenki_sandbox._transport import _ConnectError

    return _ConnectError(code, message)


class FakeTenkiRPC:
    """Control and data plane of a fake Tenki, answering with the SDK's protobuf messages."""

    endpoint = "fake-data-plane"

    def __init__(self, docker_client: Any) -> None:
        self.docker = docker_client
        self.sessions: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.unreachable: set[str] = set()
        self.lock = threading.Lock()

    def named(self, method: str) -> list[Any]:
        return [request for name, request in self.calls if name == method]

    def close(self) -> None:
        return None

    def ensure_serving(self, session_id: str, **_: Any) -> None:
        return None

    def remove_all(self) -> None:
        for session_id in list(self.sessions):
            self._remove(session_id)

    # -- control plane ---------------------------------------------------------------------

    def create_session(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("create_session", request))
        session_id = f"ses_{secrets.token_hex(6)}"
        with_docker = request.snapshot_id == DOCKER_SNAPSHOT
        container = self._start(session_id, with_docker)
        self.sessions[session_id] = {
            "container": container, "request": request, "state": pb.SESSION_STATE_RUNNING,
            "ports": set(),
        }
        response = pb.CreateSessionResponse()
        response.session.CopyFrom(self._session(session_id))
        return response

    def _session(self, session_id: str) -> Any:
        from tenki_sandbox._pb import pb

        record = self.sessions[session_id]
        request = record["request"]
        holder = pb.GetSessionResponse()
        session = holder.session
        session.id = session_id
        session.name = request.name
        session.state = record["state"]
        session.cpu_cores = request.cpu_cores or 2
        session.memory_mb = request.memory_mb or 2048
        session.metadata.update(dict(request.metadata))
        return session

    def get_session(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("get_session", request))
        if request.session_id not in self.sessions:
            raise _error("not_found", f"session {request.session_id} not found")
        response = pb.GetSessionResponse()
        response.session.CopyFrom(self._session(request.session_id))
        return response

    def list_workspace_sandboxes(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("list_workspace_sandboxes", request))
        response = pb.ListWorkspaceSandboxesResponse()
        for session_id in list(self.sessions):
            response.sessions.add().CopyFrom(self._session(session_id))
        return response

    def terminate_session(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("terminate_session", request))
        if request.session_id not in self.sessions:
            raise _error("not_found", f"session {request.session_id} not found")
        response = pb.TerminateSessionResponse()
        response.session.CopyFrom(self._session(request.session_id))
        response.session.state = pb.SESSION_STATE_TERMINATED
        self._remove(request.session_id)
        return response

    def create_session_credential(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("create_session_credential", request))
        if request.session_id not in self.sessions:
            raise _error("not_found", f"session {request.session_id} not found")
        return pb.CreateSessionCredentialResponse(
            data_plane_endpoint=self.endpoint,
            route_status=pb.DATA_PLANE_ROUTE_STATUS_VERIFIED,
        )

    def expose_port(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("expose_port", request))
        self._container(request.session_id)
        self.sessions[request.session_id]["ports"].add(request.port)
        return pb.ExposePortResponse(port=request.port,
                                     preview_url=f"http://127.0.0.1:{request.port}")

    # -- data plane ------------------------------------------------------------------------

    def run(self, requests: Iterator[Any], **_: Any) -> Iterator[Any]:
        from tenki_sandbox._pb import pb

        start = next(requests).start
        self.calls.append(("run", start))
        container = self._container(start.session_id)
        if start.session_id in self.unreachable:
            raise _error("unavailable", "connection reset by peer")
        argv = list(start.cmd)
        if start.timeout_ms:
            argv = ["timeout", "-s", "KILL", f"{start.timeout_ms / 1000:g}", *argv]
        started = time.monotonic()
        session_env = dict(self.sessions[start.session_id]["request"].env)
        code, (out, err) = container.exec_run(
            argv, workdir=start.cwd or None, environment={**session_env, **start.env} or None,
            demux=True)
        timed_out = bool(start.timeout_ms) and code == 137
        drained: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=lambda: [drained.put(r) for r in requests], daemon=True).start()
        yield pb.RunResponse(started=pb.RunStarted(pid=1))
        if out:
            yield pb.RunResponse(stdout=out)
        if err:
            yield pb.RunResponse(stderr=err)
        yield pb.RunResponse(exit=pb.RunExit(
            exit_code=code, timed_out=timed_out,
            duration_ms=int((time.monotonic() - started) * 1000)))

    def write_file(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("write_file", request))
        put_file(self._container(request.session_id), request.path, request.content)
        return pb.WriteFileResponse(path=request.path, size_bytes=len(request.content))

    def read_file(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("read_file", request))
        data = get_file(self._container(request.session_id), request.path)
        if data is None:
            raise _error("not_found", f"open {request.path}: no such file or directory")
        return pb.ReadFileResponse(path=request.path, content=data)

    def mkdir(self, request: Any, **_: Any) -> Any:
        from tenki_sandbox._pb import pb

        self.calls.append(("mkdir", request))
        self._container(request.session_id).exec_run(["mkdir", "-p", request.path])
        return pb.MkdirResponse() if hasattr(pb, "MkdirResponse") else None

    # -- the containers behind sessions ------------------------------------------------------

    def _container(self, session_id: str) -> Any:
        record = self.sessions.get(session_id)
        if record is None:
            raise _error("not_found", f"session {session_id} not found")
        return record["container"]

    def _start(self, session_id: str, with_docker: bool) -> Any:
        volumes: dict[str, dict[str, str]] = {}
        docker_cli = shutil.which("docker")
        if docker_cli:  # on PATH only for snapshots with Docker; else the installer links it
            volumes["/var/run/docker.sock"] = {"bind": "/var/run/docker.sock", "mode": "rw"}
            target = "/usr/local/bin/docker" if with_docker else "/opt/fake-tenki/docker"
            volumes[docker_cli] = {"bind": target, "mode": "ro"}
        return self.docker.containers.run(
            BASE_IMAGE, KEEP_ALIVE, detach=True, name=f"fake-tenki-{session_id}",
            network_mode="host", volumes=volumes,
            labels={FAKE_LABEL: session_id, "agentenv.sandbox": session_id},
        )

    def _remove(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)
        SandboxContainers(self.docker, FAKE_LABEL).remove(session_id)

"""Seeding a website through the gateway (:mod:`agentenv_mcp_env.seeding`), with a real
gateway and backend on 127.0.0.1: the data plane when the backend serves it, the reference's
REST calls (``/api/reset``, ``/api/add`` with the file's path) when it does not. The sandbox is
FolderSandbox, a TEST DOUBLE whose "containers" are folders of this machine, so the file the
REST backend is told to read really is where it was put."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from agent_env.api import ArtifactFile, StepError
from agentenv_mcp_env.deployment import EnvServerRecord, GatewayDeployment
from agentenv_mcp_env.seeding import seed_website
from agentenv_protocol.testing import RunningServer, serve_app, serve_gateway
from agentenv_protocol.websites import Site


@pytest.fixture(autouse=True)
def _private_state(state_root: Any) -> Any:
    """No Docker here: the gateway and backends run in this process."""
    return state_root


class FolderSandbox:
    """TEST DOUBLE of a sandbox: a container's path ``/x`` is ``<root>/<container>/x``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def where(self, container: str, path: str) -> Path:
        return self.root / container / path.lstrip("/")

    async def put_container_file(self, container: str, path: str, data: bytes,
                                 mode: int = 0o644) -> None:
        target = self.where(container, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class Backend:
    """A website backend: with ``data_plane`` it serves /agentenv, else only the REST routes
    (reading the file at the path it is given, mapped through the FolderSandbox)."""

    def __init__(self, sandbox: FolderSandbox, data_plane: bool) -> None:
        self.sandbox, self.data_plane = sandbox, data_plane
        self.calls: list[tuple[str, Any]] = []

    def app(self) -> web.Application:
        async def rpc(request: web.Request) -> web.Response:
            msg = await request.json()
            self.calls.append((msg["method"], msg.get("params")))
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": {}})

        async def rest(request: web.Request) -> web.Response:
            body = await request.json() if request.can_read_body else None
            if request.path == "/api/add":
                path = self.sandbox.where("site-website-backend", body["file_path"])
                body = {"read": path.read_text()}
            self.calls.append((request.path, body))
            return web.json_response({"ok": True})

        async def health(request: web.Request) -> web.Response:
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_get("/api/health", health)
        app.router.add_get("/", health)
        if self.data_plane:
            app.router.add_post("/agentenv", rpc)
        app.router.add_post("/api/reset", rest)
        app.router.add_post("/api/add", rest)
        return app


@contextlib.asynccontextmanager
async def deployment(tmp_path: Path, data_plane: bool) -> AsyncIterator[Any]:
    sandbox = FolderSandbox(tmp_path)
    backend = Backend(sandbox, data_plane)
    async with serve_app(backend.app()) as back, \
            serve_gateway([], websites=[Site("site", back.url, back.url)]) as gw:
        yield backend, sandbox, _deployed(gw, sandbox)


def _deployed(gw: RunningServer, sandbox: FolderSandbox) -> GatewayDeployment:
    site = EnvServerRecord("e", 1, "site-website-backend", "", "site")
    return GatewayDeployment(env_id="e", env_version=1, instance_id="e-1",
                             environment_name="site", url=gw.url, token=str(gw.token),
                             image="", gateway_image="", created_at="", expires_at="",
                             sandbox=sandbox, websites=(site,))  # type: ignore[arg-type]


FILE = ArtifactFile("list.json", b'{"todos": [{"text": "pay rent"}]}')


async def test_a_backend_with_the_data_plane_gets_reset_and_a_file_part(tmp_path: Path) -> None:
    async with deployment(tmp_path, data_plane=True) as (backend, sandbox, deployed):
        await seed_website(deployed, deployed.websites[0], FILE)
        assert sandbox.where("site-website-backend", "/tmp/data/list.json").read_bytes() == \
            FILE.data
        assert backend.calls == [("data/reset", {}), ("data/add", {"parts": [{
            "kind": "file", "file": {"name": "list.json", "mimeType": "application/json",
                                     "uri": "file:///tmp/data/list.json"}}]})]


async def test_a_backend_without_it_gets_the_rest_calls(tmp_path: Path) -> None:
    async with deployment(tmp_path, data_plane=False) as (backend, _, deployed):
        await seed_website(deployed, deployed.websites[0], FILE)
        assert backend.calls == [("/api/reset", None),
                                 ("/api/add", {"read": FILE.data.decode()})]


async def test_a_backend_that_fails_the_file_fails_the_load_naming_it(tmp_path: Path) -> None:
    async with deployment(tmp_path, data_plane=False) as (backend, _, deployed):
        backend.sandbox = FolderSandbox(tmp_path / "elsewhere")  # it will not find the file
        with pytest.raises(StepError) as failed:
            await seed_website(deployed, deployed.websites[0], FILE)
    assert str(failed.value).startswith(
        "website 'site' did not take list.json: POST /api/add answered 500")

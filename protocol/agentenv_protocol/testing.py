"""Run env servers and gateways in-process on free ports (tests, benchmarks, plugin tests).

Async code uses ``serve_env`` / ``serve_gateway`` / ``serve_app`` (async context managers
yielding a ``RunningServer``); sync code (e.g. Docker plugin tests) uses ``serve_in_thread``,
which runs the app on its own event loop in a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import attrs
from aiohttp import web


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now on ``host`` (prefer ``serve_app``, which cannot race)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@attrs.define
class RunningServer:
    """A live server: ``url`` is its base (``http://127.0.0.1:<port>``)."""

    url: str
    port: int
    app: web.Application
    runner: web.AppRunner | None = None
    token: str | None = None

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint; for a gateway, its capability URL (token in the path)."""
        return self.url_for("/mcp")

    def url_for(self, path: str) -> str:
        """``path`` under this server, under ``/t/<token>`` when a token is set."""
        prefix = f"/t/{self.token}" if self.token else ""
        return f"{self.url}{prefix}{path}"

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


async def start_app(app: web.Application, *, host: str = "127.0.0.1", port: int = 0,
                    token: str | None = None) -> RunningServer:
    """Start ``app`` on ``host``:``port`` (0 = a free port, bound without a race); an app
    given the connection guard (the env server's and the gateway's) is served through it."""
    from .guard import GUARD_KEY, start_guarded

    if GUARD_KEY in app:
        runner, guarded = await start_guarded(app, host, port)
        bound = guarded.bound_port
        shown = f"[{host}]" if ":" in host else host
        return RunningServer(f"http://{shown}:{bound}", bound, app, runner, token)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    site = web.SockSite(runner, sock)
    await site.start()
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return RunningServer(f"http://{shown}:{bound}", bound, app, runner, token)


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, *, host: str = "127.0.0.1", port: int = 0,
                    token: str | None = None) -> AsyncIterator[RunningServer]:
    """Serve ``app`` for the duration of the block."""
    server = await start_app(app, host=host, port=port, token=token)
    try:
        yield server
    finally:
        await server.close()


@contextlib.asynccontextmanager
async def serve_env(env: Any, *, host: str = "127.0.0.1", port: int = 0,
                    **app_options: Any) -> AsyncIterator[RunningServer]:
    """Serve an ``AgentEnvEnvironment`` instance (options go to ``server.create_app``)."""
    from .server import create_app

    async with serve_app(create_app(env, **app_options), host=host, port=port) as server:
        yield server


@contextlib.asynccontextmanager
async def serve_gateway(children: Sequence[str], *, token: str | None = None,
                        host: str = "127.0.0.1", port: int = 0, settle_timeout: float = 30.0,
                        **gateway_options: Any) -> AsyncIterator[RunningServer]:
    """Serve a gateway over ``children`` (base URLs); a random token unless one is given.

    The block starts once every child is connected or has failed its first readiness wait
    (bounded by ``settle_timeout``); other options go to ``gateway.create_gateway_app``.
    """
    from .gateway import GATEWAY_KEY, create_gateway_app

    token = token or secrets.token_urlsafe(24)
    app = create_gateway_app(list(children), token=token, **gateway_options)
    async with serve_app(app, host=host, port=port, token=token) as server:
        await app[GATEWAY_KEY].wait_settled(settle_timeout)
        yield server


@contextlib.contextmanager
def serve_in_thread(app_factory: Callable[[], web.Application], *, host: str = "127.0.0.1",
                    port: int = 0, token: str | None = None,
                    timeout: float = 30.0) -> Iterator[RunningServer]:
    """Run ``app_factory()`` on its own loop in a daemon thread, for synchronous callers."""
    loop = asyncio.new_event_loop()
    started: dict[str, Any] = {}
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            started["server"] = loop.run_until_complete(
                start_app(app_factory(), host=host, port=port, token=token))
        except BaseException as exc:
            started["error"] = exc
        ready.set()
        if "server" in started:
            loop.run_forever()

    thread = threading.Thread(target=run, name="agentenv-test-server", daemon=True)
    thread.start()
    if not ready.wait(timeout):
        raise TimeoutError("server did not start")
    if "error" in started:
        raise started["error"]
    server: RunningServer = started["server"]
    try:
        yield server
    finally:
        fut = asyncio.run_coroutine_threadsafe(server.close(), loop)
        with contextlib.suppress(Exception):
            fut.result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        loop.close()

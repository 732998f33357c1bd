"""The front of a deployed agent: ``python -m agentenv_agents.agent_front``.

An agent's A2A port is the one the host reaches, and whoever reaches it drives a model on the
run's account. Agents built on our SDK check their ``A2A_TOKEN``, but an agent built on another
SDK (the reference's takes no token) would answer anyone. So the ``a2a`` agent type never
publishes the agent itself: it publishes this front, which checks the bearer token and forwards
everything else, unchanged and streamed (SSE included), to the agent on the sandbox's network.
The card and ``/health`` stay public, as A2A clients read the card before they authenticate.

Runs from the model gateway's image (no image of its own). Settings: ``AGENTENV_FRONT_TARGET``
(``http://agent-x:8000``), ``AGENTENV_FRONT_TOKEN``, ``AGENTENV_FRONT_PORT`` (default 8000).
"""

from __future__ import annotations

import asyncio
import hmac
import os
import signal
from typing import Any

import aiohttp
from aiohttp import web

DEFAULT_PORT = 8000
PUBLIC_PATHS = frozenset({"/health", "/.well-known/agent-card.json", "/.well-known/agent.json"})
#: Not forwarded either way: hop-by-hop headers, and what aiohttp sets itself.
HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                         "te", "trailers", "transfer-encoding", "upgrade", "host",
                         "content-length"})
SESSION_KEY = web.AppKey("session", aiohttp.ClientSession)


def create_app(target: str, token: str) -> web.Application:
    expected = f"Bearer {token}".encode()

    async def forward(request: web.Request) -> web.StreamResponse:
        if request.path not in PUBLIC_PATHS:
            given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, expected):
                return web.json_response(
                    {"ok": False, "error": {"code": "unauthorized",
                                            "message": "missing or wrong bearer token"}},
                    status=401, headers={"WWW-Authenticate": "Bearer"})
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        body = await request.read()
        session = request.app[SESSION_KEY]
        try:
            upstream = await session.request(request.method, target + str(request.rel_url),
                                             headers=headers, data=body or None,
                                             allow_redirects=False)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return web.json_response(
                {"ok": False, "error": {"code": "agent_unreachable",
                                        "message": f"the agent does not answer: "
                                                   f"{type(exc).__name__}"}}, status=502)
        async with upstream:
            reply = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS})
            await reply.prepare(request)
            async for chunk in upstream.content.iter_any():
                await reply.write(chunk)
            await reply.write_eof()
            return reply

    async def session_ctx(app: web.Application) -> Any:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=2)
        async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
            app[SESSION_KEY] = session
            yield

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.cleanup_ctx.append(session_ctx)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


async def main() -> None:
    target = os.environ["AGENTENV_FRONT_TARGET"].rstrip("/")
    token = os.environ["AGENTENV_FRONT_TOKEN"]
    port = int(os.environ.get("AGENTENV_FRONT_PORT") or DEFAULT_PORT)
    runner = web.AppRunner(create_app(target, token), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    print(f"agent front serving on :{port} for {target}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())

"""The gateway's websites: /website/<name>/ and /svc/<name>/ reach a site's frontend and
backend (real aiohttp servers on 127.0.0.1), each request is an http_request event, nothing
else is reachable through them, and readiness waits for the site."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agentenv_protocol import McpClient
from agentenv_protocol.testing import RunningServer, serve_app, serve_gateway
from agentenv_protocol.websites import BODY_CAP, Site, parse_site


class Upstream:
    """A tiny HTTP server that records the paths it was asked for."""

    def __init__(self, role: str, *, healthy: bool = True) -> None:
        self.role = role
        self.healthy = healthy
        self.seen: list[tuple[str, str, bytes]] = []
        self.stall = False

    def app(self) -> web.Application:
        async def any_route(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            self.seen.append((request.method, request.path_qs, body))
            if self.stall:
                await asyncio.sleep(3)
            if request.path == "/api/health":
                return web.json_response({"ok": self.healthy}, status=200 if self.healthy
                                         else 503)
            if request.path == "/login":
                return web.Response(status=302, headers={"Location": "/welcome?x=1"})
            if request.path == "/auth" and "authorization" in request.headers:
                return web.Response(status=500, text="the token leaked upstream")
            return web.json_response({"role": self.role, "path": request.path_qs,
                                      "body": body.decode()}, status=201
                                     if request.method == "POST" else 200)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", any_route)
        return app


@pytest.fixture
async def site() -> AsyncIterator[tuple[Upstream, Upstream, RunningServer, RunningServer]]:
    front, back = Upstream("frontend"), Upstream("backend")
    async with serve_app(front.app()) as f, serve_app(back.app()) as b:
        yield front, back, f, b


@pytest.fixture
async def gateway(site: Any) -> AsyncIterator[RunningServer]:
    _, _, f, b = site
    async with serve_gateway([], websites=[Site("shop", f.url, b.url)], call_timeout=2,
                             ready_timeout=10,
                             internal_url="http://gateway:18765") as gw:
        for upstream in site[:2]:
            upstream.seen.clear()  # the readiness probes'
        yield gw


async def _events(gw: RunningServer) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(gw.url_for("/trajectory")) as resp:
        return [json.loads(line) for line in (await resp.text()).splitlines() if line]


async def test_pages_and_api_go_through_and_each_request_is_an_event(
        gateway: RunningServer, site: Any) -> None:
    _, back, _, _ = site
    async with aiohttp.ClientSession() as http:
        async with http.get(gateway.url_for("/website/shop/index.html?q=1")) as resp:
            assert resp.status == 200
            assert await resp.json() == {"role": "frontend", "path": "/index.html?q=1",
                                         "body": ""}
        async with http.post(gateway.url_for("/svc/shop/api/items"),
                             json={"name": "pen"}) as resp:
            assert resp.status == 201
            assert (await resp.json())["role"] == "backend"
    assert ("POST", "/api/items", b'{"name": "pen"}') in back.seen
    http_events = [e for e in await _events(gateway) if e["type"] == "http_request"]
    assert [(e["route"], e["service"], e["method"], e["path"], e["query"], e["status"])
            for e in http_events] == [("website", "shop", "GET", "/index.html", "q=1", 200),
                                      ("svc", "shop", "POST", "/api/items", "", 201)]
    assert http_events[1]["request_body"] == '{"name": "pen"}'
    assert all(e["duration_ms"] >= 0 and e["response_bytes"] > 0 for e in http_events)


async def test_a_long_body_is_cut_in_the_event(gateway: RunningServer) -> None:
    body = "x" * (BODY_CAP + 500)
    async with aiohttp.ClientSession() as http, \
            http.post(gateway.url_for("/svc/shop/api/big"), data=body) as resp:
        assert resp.status == 201
    event = [e for e in await _events(gateway) if e["type"] == "http_request"][-1]
    assert len(event["request_body"]) == BODY_CAP
    assert event["request_bytes"] == BODY_CAP + 500


async def test_no_token_no_site(gateway: RunningServer, site: Any) -> None:
    front, *_ = site
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{gateway.url}/website/shop/") as resp:
            assert resp.status == 401
        async with http.get(f"{gateway.url}/website/shop/",
                            headers={"Authorization": "Bearer wrong"}) as resp:
            assert resp.status == 401
    assert front.seen == []


async def test_only_the_envs_own_servers_are_reached(gateway: RunningServer,
                                                     site: Any) -> None:
    """An unknown name is a 404 naming the sites; a path that looks like another host stays
    a path on the site; the gateway's token never goes upstream."""
    front, *_ = site
    async with aiohttp.ClientSession() as http:
        async with http.get(gateway.url_for("/website/example.com/")) as resp:
            assert resp.status == 404
            assert "no website 'example.com' in this env (its websites: shop)" in \
                (await resp.json())["error"]["message"]
        async with http.get(gateway.url_for("/website/shop//example.com/x")) as resp:
            assert resp.status == 200
            assert (await resp.json())["role"] == "frontend"
        async with http.get(gateway.url_for("/website/shop/auth"),
                            headers=gateway.auth_headers) as resp:
            assert resp.status == 200, "the Authorization header reached the site"
    paths = [path for _, path, _ in front.seen]
    assert len(paths) == 2 and paths[0].endswith("/example.com/x") and paths[1] == "/auth"


async def test_a_redirect_stays_on_the_site(gateway: RunningServer) -> None:
    async with aiohttp.ClientSession() as http, \
            http.get(gateway.url_for("/website/shop/login"), allow_redirects=False) as resp:
        assert resp.status == 302
        assert resp.headers["Location"] == f"/t/{gateway.token}/website/shop/welcome?x=1"
        async with http.get(gateway.url_for("/website/shop"), allow_redirects=False) as root:
            assert root.status == 302
            assert root.headers["Location"] == f"/t/{gateway.token}/website/shop/"


async def test_list_website_urls_names_the_site_as_the_browser_reaches_it(
        gateway: RunningServer) -> None:
    async with McpClient(gateway.mcp_url) as client:
        assert "list_website_urls" in [t["name"] for t in await client.list_tools_raw()]
        result = await client.call_tool_raw("list_website_urls", {})
    assert result["structuredContent"] == {"result": ["http://gateway:18765/website/shop/"]}


async def test_ready_waits_for_the_backend_and_names_it(site: Any) -> None:
    _, back, f, b = site
    back.healthy = False
    async with serve_gateway([], websites=[Site("shop", f.url, b.url)], settle_timeout=1,
                             ready_timeout=10) as gw, aiohttp.ClientSession() as http:
        async with http.get(gw.url_for("/ready")) as resp:
            assert resp.status == 503
            body = await resp.json()
        assert "website shop: its backend's /api/health answered 503" in body["waiting"]
        back.healthy = True
        for _ in range(100):
            async with http.get(gw.url_for("/ready")) as resp:
                if resp.status == 200:
                    break
            await asyncio.sleep(0.05)
        assert resp.status == 200


async def test_a_backend_that_never_answers_is_a_502_naming_it(gateway: RunningServer,
                                                               site: Any) -> None:
    _, back, _, _ = site
    back.stall = True
    async with aiohttp.ClientSession() as http, \
            http.get(gateway.url_for("/svc/shop/api/items")) as resp:
        assert resp.status == 502
        message = (await resp.json())["error"]["message"]
    assert message.startswith("website 'shop': its backend did not answer")
    event = [e for e in await _events(gateway) if e["type"] == "http_request"][-1]
    assert (event["path"], event["status"]) == ("/api/items", 502)


async def test_a_frontend_that_is_not_http_keeps_the_site_waiting(site: Any) -> None:
    _, _, _, b = site

    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(not_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with serve_gateway([], websites=[Site("shop", f"http://127.0.0.1:{port}", b.url)],
                                 settle_timeout=2, ready_timeout=5) as gw, \
                aiohttp.ClientSession() as http, http.get(gw.url_for("/ready")) as resp:
            assert resp.status == 503
            waiting = (await resp.json())["waiting"]
        assert any(w.startswith("website shop: its frontend is unreachable or not HTTP")
                   for w in waiting), waiting
    finally:
        server.close()


def test_the_website_option_names_its_form() -> None:
    assert parse_site("shop=http://f:80,http://b:8000/") == Site("shop", "http://f:80",
                                                                 "http://b:8000")
    with pytest.raises(ValueError, match="NAME=FRONTEND_URL,BACKEND_URL"):
        parse_site("shop=http://f:80")


async def test_the_site_token_opens_the_pages_and_nothing_else(site: Any) -> None:
    """What the env's browser holds: pages of /website/ by Bearer header, and no tools,
    trajectory, clock, backend or capability URL."""
    _, _, f, b = site
    async with serve_gateway([], websites=[Site("shop", f.url, b.url)], site_token="pages",
                             settle_timeout=5) as gw, aiohttp.ClientSession() as http:
        bearer = {"Authorization": "Bearer pages"}
        async with http.get(f"{gw.url}/website/shop/", headers=bearer) as resp:
            assert resp.status == 200
        for method, path in (("GET", "/svc/shop/api/items"), ("POST", "/mcp"),
                             ("GET", "/trajectory"), ("POST", "/trajectory/clear"),
                             ("POST", "/tools/enable"), ("GET", "/clock/state"),
                             ("GET", "/state")):
            async with http.request(method, f"{gw.url}{path}", headers=bearer) as resp:
                assert resp.status == 401, (method, path)
        async with http.get(f"{gw.url}/t/pages/website/shop/") as resp:
            assert resp.status in (401, 404)
        async with http.get(gw.url_for("/website/shop/")) as resp:  # the gateway's own token
            assert resp.status == 200


async def test_a_site_named_website_is_routed_by_the_route_not_the_name(site: Any) -> None:
    """``/svc/website/...`` is the backend of a site called ``website``, not a page."""
    _, _, f, b = site
    async with serve_gateway([], websites=[Site("website", f.url, b.url)], site_token="pages",
                             settle_timeout=5) as gw, aiohttp.ClientSession() as http:
        async with http.get(gw.url_for("/svc/website/api/x")) as resp:
            assert (await resp.json())["role"] == "backend"
        async with http.get(f"{gw.url}/svc/website/api/x",
                            headers={"Authorization": "Bearer pages"}) as resp:
            assert resp.status == 401

"""The gateway's websites: a ``website`` env's frontend and backend, proxied and recorded.

A website is two HTTP servers on the env's private network (the ``website`` env type starts
them): a frontend (its pages) and a backend (its REST API and the agentenv data plane). The
gateway (``--website NAME=FRONTEND_URL,BACKEND_URL``) passes

* ``/website/<name>/<path>`` to the frontend, and
* ``/svc/<name>/<path>`` to the backend (what ``load_artifact`` seeds it through),

and records each request as an ``http_request`` trajectory event: ``route`` (``website`` or
``svc``), ``service``, ``method``, ``path``, ``query``, ``status``, ``duration_ms``, the
request body (``request_body``, text, cut at :data:`BODY_CAP` bytes with ``request_bytes``
saying how long it was) and ``response_bytes``. Requests need the gateway's token like any
other; the env's browser holds a site token instead, which opens ``/website/...`` and nothing
else (not ``/svc/``, tools, the trajectory or the clock), so a page the agent scripts cannot
reach the gateway's controls.

Only the named sites are reached: a name the gateway was not given is a 404, and the upstream
URL is always ``<site base>/<path>``, so no request can make the gateway fetch another host
(it is no open proxy). A redirect to an absolute path of the site (``Location: /login``) is
rewritten under the prefix, so it stays on the site; pages should link relatively.

Readiness: a website is ready when its backend's ``/api/health`` answers 2xx (the reference's
healthcheck; a backend without that route is ready when ``/`` answers below 500) and its
frontend's ``/`` answers below 500. The gateway's ``/ready`` waits for every site.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import attrs
from aiohttp import web

#: How much of a request body an ``http_request`` event keeps.
BODY_CAP = 4096
#: Headers not passed either way (hop-by-hop, and the gateway's own credentials).
_HOP = frozenset({"host", "authorization", "connection", "keep-alive", "content-length",
                  "transfer-encoding", "upgrade", "te", "trailer", "proxy-authorization",
                  "proxy-authenticate"})
_DROPPED_BACK = _HOP | {"content-encoding", "date", "server"}
ROUTES = {"website": "frontend", "svc": "backend"}


@attrs.frozen
class Site:
    """One website: its name and the base URLs of its two servers."""

    name: str
    frontend: str
    backend: str


def parse_site(spec: str) -> Site:
    """``NAME=FRONTEND_URL,BACKEND_URL`` (``--website``); ValueError naming the form."""
    name, _, urls = spec.partition("=")
    frontend, _, backend = urls.partition(",")
    if not name or not frontend.startswith("http") or not backend.startswith("http"):
        raise ValueError(f"--website takes NAME=FRONTEND_URL,BACKEND_URL, not {spec!r}")
    return Site(name, frontend.rstrip("/"), backend.rstrip("/"))


Record = Callable[..., None]


class Websites:
    """The gateway's websites: routes, readiness and their events (``record(**event)``)."""

    def __init__(self, sites: Mapping[str, Site], record: Record, *,
                 internal_url: str | None) -> None:
        self.sites = dict(sites)
        self.record = record
        self.internal_url = internal_url
        #: name -> why it is not ready yet (absent: ready)
        self.waiting: dict[str, str] = {name: "not probed yet" for name in self.sites}
        self._http: aiohttp.ClientSession | None = None

    def urls(self) -> dict[str, str]:
        """Each site's address for a browser inside the env (through the gateway)."""
        base = self.internal_url or ""
        return {name: f"{base}/website/{name}/" for name in self.sites}

    @property
    def ready(self) -> bool:
        return not self.waiting

    async def bring_up(self, http: aiohttp.ClientSession, timeout: float) -> None:
        """Probe every site until it is ready (background; ``/ready`` reports the rest)."""
        self._http = http
        deadline = time.monotonic() + timeout
        while self.waiting:
            await self.probe(http)
            if not self.waiting:
                return
            await asyncio.sleep(0.05 if time.monotonic() < deadline else 1.0)

    async def probe(self, http: aiohttp.ClientSession) -> dict[str, str]:
        """Look at every site now; ``{name: why}`` for those not ready (also kept)."""
        outcomes = await asyncio.gather(*(_site_problem(http, s) for s in self.sites.values()))
        self.waiting = {name: why for name, why in zip(self.sites, outcomes, strict=True)
                        if why is not None}
        return dict(self.waiting)

    async def website_route(self, request: web.Request) -> web.StreamResponse:
        """``/website/<name>/<tail>``: the site's frontend."""
        return await self._route(request, "website")

    async def svc_route(self, request: web.Request) -> web.StreamResponse:
        """``/svc/<name>/<tail>``: the site's backend."""
        return await self._route(request, "svc")

    async def _route(self, request: web.Request, kind: str) -> web.StreamResponse:
        """Forward to the site's frontend or backend (``kind``) and record the request."""
        name = request.match_info["site"]
        site = self.sites.get(name)
        if site is None:
            known = ", ".join(sorted(self.sites)) or "none"
            return web.json_response({"error": {"code": "not_found", "message": (
                f"no website {name!r} in this env (its websites: {known})")}}, status=404)
        if "tail" not in request.match_info:  # /website/<name>: the site's root, as a folder
            query = f"?{request.query_string}" if request.query_string else ""
            return web.Response(status=302, headers={"Location": f"{request.path}/{query}"})
        base = site.frontend if kind == "website" else site.backend
        tail = request.match_info["tail"]
        body = await request.read()
        start = time.perf_counter()
        status, size, response = 502, 0, None
        try:
            response = await self._forward(request, f"{base}/{tail}", body,
                                           prefix=request.path[:len(request.path) - len(tail)])
            status, size = response.status, response.content_length or 0
            return response
        except (TimeoutError, aiohttp.ClientError) as exc:
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return web.json_response({"error": {"code": "env_unavailable", "message": (
                f"website {name!r}: its {ROUTES[kind]} did not answer ({why})")}}, status=502)
        finally:
            shown = body[:BODY_CAP].decode("utf-8", errors="replace")
            self.record(route=kind, service=name, method=request.method, path=f"/{tail}",
                        query=request.query_string, status=status,
                        duration_ms=round((time.perf_counter() - start) * 1000, 3),
                        request_body=shown, request_bytes=len(body), response_bytes=size)

    async def _forward(self, request: web.Request, url: str, body: bytes, *,
                       prefix: str) -> web.Response:
        assert self._http is not None, "the gateway has not started"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self._http.request(request.method, url, params=request.query, data=body,
                                      headers=headers, allow_redirects=False) as resp:
            data = await resp.read()
            out = {k: v for k, v in resp.headers.items() if k.lower() not in _DROPPED_BACK}
            location = out.get("Location") or out.get("location")
            if location and location.startswith("/") and not location.startswith("//"):
                out.pop("location", None)
                out["Location"] = prefix.rstrip("/") + location
            return web.Response(body=data, status=resp.status, headers=out)

    def list_tool(self) -> dict[str, Any]:
        """The ``list_website_urls`` tool the gateway serves when it has websites."""
        return {"name": "list_website_urls",
                "description": "List the website URLs of this env that can be browsed.",
                "inputSchema": {"type": "object", "properties": {}}}

    def list_result(self) -> dict[str, Any]:
        urls = list(self.urls().values())
        return {"content": [{"type": "text", "text": "\n".join(urls)}],
                "structuredContent": {"result": urls}, "isError": False}


async def _site_problem(http: aiohttp.ClientSession, site: Site) -> str | None:
    """Why ``site`` is not ready (naming its backend or frontend), or None."""
    timeout = aiohttp.ClientTimeout(total=2)
    role = "backend"
    try:
        async with http.get(f"{site.backend}/api/health", timeout=timeout) as resp:
            status = resp.status
        if status == 404:
            async with http.get(f"{site.backend}/", timeout=timeout) as resp:
                status = 200 if resp.status < 500 else resp.status
        if not 200 <= status < 300:
            return f"its backend's /api/health answered {status}"
        role = "frontend"
        async with http.get(f"{site.frontend}/", timeout=timeout) as resp:
            if resp.status >= 500:
                return f"its frontend's / answered {resp.status}"
    except TimeoutError:
        return f"its {role} gave no answer within 2s"
    except aiohttp.ClientError as exc:
        return f"its {role} is unreachable or not HTTP ({type(exc).__name__})"
    return None

"""The egress proxy of an ``allowlist`` agent, on real sockets: two HTTP servers on two loopback
addresses (127.0.0.1 and 127.0.0.2), reached through the proxy by the standard library's own
proxy-aware clients, as an agent's code would. A listed host passes, by name or by CIDR, over
CONNECT and over plain HTTP; anything else is a 403 naming the list; a client without the
proxy's credentials gets a 407."""

from __future__ import annotations

import asyncio
import base64
import http.client
import http.server
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from agentenv_agents.egress_proxy import EgressPolicy, serve

TOKEN = "proxy-secret"


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.server.server_address[0]} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, int]]:
    """An HTTP server on 127.0.0.1 and one on 127.0.0.2: address -> port."""
    started = []
    for address in ("127.0.0.1", "127.0.0.2"):
        server = http.server.ThreadingHTTPServer((address, 0), Hello)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
    yield {s.server_address[0]: s.server_address[1] for s in started}  # type: ignore[misc]
    for server in started:
        server.shutdown()


class Proxy:
    """The proxy on its own event loop in a thread (the clients under test block)."""

    def __init__(self, hosts: list[str], cidrs: list[str]) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        policy = EgressPolicy.from_lists(hosts, cidrs)
        self.server = asyncio.run_coroutine_threadsafe(
            serve(policy, TOKEN, "127.0.0.1", 0), self.loop).result(10)
        self.port = self.server.sockets[0].getsockname()[1]

    def url(self, token: str = TOKEN) -> str:
        return f"http://agentenv:{token}@127.0.0.1:{self.port}"

    def close(self) -> None:
        async def shut() -> None:
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def get(proxy_url: str, url: str) -> tuple[int, str]:
    """GET ``url`` through ``proxy_url`` with urllib, which reads the credentials from it."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy_url}))
    try:
        with opener.open(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def tunnel(proxy: Proxy, host: str, port: int, token: str = TOKEN) -> tuple[int, str]:
    """GET / through a CONNECT tunnel (how HTTPS goes through a proxy)."""
    auth = base64.b64encode(f"agentenv:{token}".encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    conn.set_tunnel(host, port, headers={"Proxy-Authorization": f"Basic {auth}"})
    try:
        conn.request("GET", "/tunnelled")
        reply = conn.getresponse()
        return reply.status, reply.read().decode()
    except OSError as exc:  # http.client raises on a refused CONNECT
        return 0, str(exc)
    finally:
        conn.close()


def test_a_host_listed_by_name_passes_and_others_are_refused_naming_the_list(
        servers: dict[str, int]) -> None:
    proxy = Proxy(["localhost", "*.example.test"], [])
    try:
        near, far = servers["127.0.0.1"], servers["127.0.0.2"]
        assert get(proxy.url(), f"http://localhost:{near}/page") == (
            200, "hello from 127.0.0.1 /page")
        assert tunnel(proxy, "localhost", near) == (200, "hello from 127.0.0.1 /tunnelled")
        status, text = get(proxy.url(), f"http://127.0.0.2:{far}/page")
        assert status == 403
        assert text == ("agentenv egress proxy: 127.0.0.2 is not on this agent's allow-list "
                        "(localhost, *.example.test)\n")
        status, text = tunnel(proxy, "127.0.0.2", far)
        assert status == 0 and "403 Forbidden" in text
        # a wildcard lists the names under the domain, not the domain itself
        status, text = get(proxy.url(), "http://example.test/")
        assert status == 403 and "example.test is not on this agent's allow-list" in text
    finally:
        proxy.close()


def test_a_cidr_passes_the_addresses_in_it_whatever_name_reaches_them(
        servers: dict[str, int]) -> None:
    proxy = Proxy([], ["127.0.0.2/32"])
    try:
        near, far = servers["127.0.0.1"], servers["127.0.0.2"]
        assert get(proxy.url(), f"http://127.0.0.2:{far}/x") == (200, "hello from 127.0.0.2 /x")
        assert tunnel(proxy, "127.0.0.2", far)[0] == 200
        status, text = get(proxy.url(), f"http://localhost:{near}/x")
        assert status == 403
        assert text.startswith("agentenv egress proxy: localhost (")  # with what it resolved to
        assert "is not on this agent's allow-list (127.0.0.2/32)" in text
    finally:
        proxy.close()


def test_without_the_proxy_credentials_nothing_passes(servers: dict[str, int]) -> None:
    proxy = Proxy(["localhost"], ["127.0.0.0/8"])
    try:
        near = servers["127.0.0.1"]
        status, text = get(proxy.url("wrong"), f"http://localhost:{near}/")
        assert status == 407
        assert "takes the credentials in the agent's HTTPS_PROXY" in text
        status, text = tunnel(proxy, "localhost", near, token="wrong")
        assert status == 0 and "407" in text
        # and with them, the same request passes
        assert get(proxy.url(), f"http://localhost:{near}/")[0] == 200
    finally:
        proxy.close()


def test_a_request_that_is_not_a_proxy_request_is_refused(servers: dict[str, int]) -> None:
    proxy = Proxy(["localhost"], [])
    try:
        auth = base64.b64encode(f"agentenv:{TOKEN}".encode()).decode()
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.request("GET", "/not-absolute", headers={"Proxy-Authorization": f"Basic {auth}"})
        reply = conn.getresponse()
        assert reply.status == 400
        assert "names an absolute http:// URL (use CONNECT for https)" in reply.read().decode()
        conn.close()
    finally:
        proxy.close()

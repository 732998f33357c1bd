"""An allow-listed agent's way out: ``python -m agentenv_agents.egress_proxy``.

A sealed agent's container is on a network whose only other members are the gateways, so it
reaches its tools and its model and nothing else. ``network_policy`` ``allowlist`` (the
reference's ``{"mode": "allowlist", "allow_hosts": [...], "allow_cidrs": [...]}``) keeps that
seal and adds one more peer: this proxy, on the sealed network and on one with a route out. The
agent's ``HTTP_PROXY``/``HTTPS_PROXY`` name it, so its HTTP clients reach a listed host through
it; the proxy refuses every other host, and the seal still drops whatever does not go through
the proxy (a raw socket, a client that ignores the proxy variables). Why a proxy rather than
firewall rules in the agent's container: the agent runs code a model wrote, often as root, and
rules inside its own container are rules it could undo.

What passes: ``CONNECT host:port`` (HTTPS, and any TCP a client tunnels) and plain HTTP in
absolute form (``GET http://host/path``, sent on as one request), each only with the proxy's
credentials (``Proxy-Authorization: Basic``, from the user:password in the proxy URL), since
the sealed network is shared by every sealed agent of the sandbox and only this one agent's
list applies. A host passes when its name is listed (``*.example.com`` lists the names under
example.com, not example.com itself) or every address it resolves to is in a listed CIDR; the
proxy then connects to the address it checked, so a name cannot resolve to another address
between the check and the connection. Refusals are a 403 whose body names the host and the
list, which a model reading its tool output can act on; each decision is one log line.

Runs from the model gateway's image (stdlib and attrs only). Settings:
``AGENTENV_EGRESS_PORT`` (default 3128), ``AGENTENV_EGRESS_TOKEN``, ``AGENTENV_EGRESS_HOSTS``
and ``AGENTENV_EGRESS_CIDRS`` (comma-separated).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import ipaddress
import os
import re
import signal
import socket
import sys
from collections.abc import Iterable, Sequence

import attrs

DEFAULT_PORT = 3128
#: The user name in the proxy URL (the password is the token).
PROXY_USER = "agentenv"
#: Longest request head the proxy reads before refusing (431).
MAX_HEAD = 64 * 1024
#: Seconds a client has to send its request head.
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def host_problem(entry: str) -> str | None:
    """Why ``entry`` is not an ``allow_hosts`` entry (None when it is): a host name, an IP
    address or ``*.domain``, without scheme, port or path."""
    if not isinstance(entry, str) or not entry.strip():
        return f"{entry!r} is not a host name"
    text = entry.strip().lower()
    if text == "*":
        return "'*' would allow every host: use network_policy 'open' instead"
    if any(c in text for c in "/:@ ") and not _is_address(text):
        return (f"'{entry}' is not a host name (give the bare name, like 'pypi.org', without "
                "scheme, port or path)")
    name = text[2:] if text.startswith("*.") else text
    if _is_address(name) and text.startswith("*."):
        return f"'{entry}': a wildcard takes a domain name, not an address"
    if not _is_address(name) and not all(_LABEL.match(part) for part in name.split(".")):
        return f"'{entry}' is not a host name"
    return None


def cidr_problem(entry: str) -> str | None:
    """Why ``entry`` is not an ``allow_cidrs`` entry (None when it is)."""
    try:
        ipaddress.ip_network(str(entry).strip(), strict=False)
    except ValueError:
        return f"'{entry}' is not a CIDR (like '10.0.0.0/8' or '2001:db8::/32')"
    return None


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


@attrs.frozen
class EgressPolicy:
    """The hosts and networks one agent may reach, checked before each connection."""

    hosts: tuple[str, ...] = attrs.field(
        converter=lambda items: tuple(h.strip().lower() for h in items if h.strip()))
    cidrs: tuple[Network, ...] = attrs.field(
        converter=lambda items: tuple(ipaddress.ip_network(str(c).strip(), strict=False)
                                      for c in items if str(c).strip()))

    @classmethod
    def from_lists(cls, hosts: Iterable[str], cidrs: Iterable[str]) -> EgressPolicy:
        return cls(tuple(hosts), tuple(cidrs))

    def names(self, host: str) -> bool:
        """``host`` is listed by name (exactly, or under a ``*.`` entry)."""
        host = host.lower().rstrip(".")
        return any(host == entry or (entry.startswith("*.") and host.endswith(entry[1:]))
                   for entry in self.hosts)

    def covers(self, address: str) -> bool:
        """``address`` is in a listed CIDR."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        return any(ip.version == net.version and ip in net for net in self.cidrs)

    def describe(self) -> str:
        listed = [*self.hosts, *(str(c) for c in self.cidrs)]
        return ", ".join(listed) or "nothing"


class Refused(Exception):
    """A request the proxy answers itself (status and one line)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


async def resolve_allowed(policy: EgressPolicy, host: str, port: int) -> list[str]:
    """The addresses to connect to for ``host``, or :class:`Refused` naming the list."""
    bare = host.strip("[]")
    if _is_address(bare):
        if policy.names(bare) or policy.covers(bare):
            return [bare]
        raise Refused(403, "Forbidden", f"{bare} is not on this agent's allow-list "
                                        f"({policy.describe()})")
    by_name = policy.names(bare)
    if not by_name and not policy.cidrs:
        raise Refused(403, "Forbidden", f"{bare} is not on this agent's allow-list "
                                        f"({policy.describe()})")
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(bare, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Refused(502, "Bad Gateway", f"cannot resolve {bare}: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if by_name:
        return addresses
    if addresses and all(policy.covers(a) for a in addresses):
        return addresses
    raise Refused(403, "Forbidden", f"{bare} ({', '.join(addresses)}) is not on this agent's "
                                    f"allow-list ({policy.describe()})")


def split_target(authority: str, default_port: int) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as a pair; :class:`Refused` when it is not one."""
    text = authority.strip()
    match = re.fullmatch(r"\[([0-9a-fA-F:.%]+)\](?::(\d+))?|([^:\[\]/]+)(?::(\d+))?", text)
    if not match:
        raise Refused(400, "Bad Request", f"'{authority}' is not host:port")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4) or default_port)
    if not 0 < port < 65536:
        raise Refused(400, "Bad Request", f"port {port} is out of range")
    return host, port


@attrs.frozen
class Head:
    """A request head as the proxy needs it."""

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


def parse_head(raw: bytes) -> Head:
    try:
        text = raw.decode("latin-1")
        first, *lines = text.split("\r\n")
        method, target, version = first.split(" ")
    except ValueError:
        raise Refused(400, "Bad Request", "not an HTTP request") from None
    headers = []
    for line in lines:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise Refused(400, "Bad Request", f"malformed header line {line[:80]!r}")
        headers.append((name.strip(), value.strip()))
    return Head(method.upper(), target, version, tuple(headers))


def authorized(head: Head, token: str) -> bool:
    given = head.header("Proxy-Authorization") or ""
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, _, password = decoded.partition(":")
    return user == PROXY_USER and hmac.compare_digest(password.encode(), token.encode())


HOP_HEADERS = frozenset({"proxy-authorization", "proxy-connection", "connection", "keep-alive"})


def forward_head(head: Head) -> tuple[str, int, bytes]:
    """Host, port and the origin-form head to send on for an absolute-form HTTP request."""
    match = re.fullmatch(r"http://([^/?#]+)([^#]*)", head.target, flags=re.IGNORECASE)
    if not match:
        raise Refused(400, "Bad Request", "a proxied request names an absolute http:// URL "
                                          "(use CONNECT for https)")
    authority, path = match.group(1), match.group(2) or "/"
    if "@" in authority:
        raise Refused(400, "Bad Request", "credentials in the URL are not forwarded")
    host, port = split_target(authority, 80)
    if not path.startswith("/"):
        path = "/" + path
    kept = [(k, v) for k, v in head.headers if k.lower() not in HOP_HEADERS]
    lines = [f"{head.method} {path} {head.version}", *(f"{k}: {v}" for k, v in kept),
             "Connection: close", "", ""]
    return host, port, "\r\n".join(lines).encode("latin-1")


class EgressProxy:
    """The proxy's server: one task per client connection."""

    def __init__(self, policy: EgressPolicy, token: str) -> None:
        self.policy, self.token = policy, token

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            except asyncio.LimitOverrunError:
                raise Refused(431, "Request Header Fields Too Large",
                              "the request head is too long") from None
            head = parse_head(raw[:-4])
            if not authorized(head, self.token):
                raise Refused(407, "Proxy Authentication Required",
                              "this proxy takes the credentials in the agent's HTTPS_PROXY")
            if head.method == "CONNECT":
                host, port = split_target(head.target, 443)
                payload = b""
            else:
                host, port, payload = forward_head(head)
            addresses = await resolve_allowed(self.policy, host, port)
            upstream_reader, upstream_writer = await self._connect(addresses, port, host)
        except Refused as refusal:
            log(f"refused {refusal}")
            body = f"agentenv egress proxy: {refusal}\n".encode()
            challenge = ('Proxy-Authenticate: Basic realm="agentenv"\r\n'
                         if refusal.status == 407 else "")
            head_text = (f"HTTP/1.1 {refusal.status} {refusal.reason}\r\n"
                         "Content-Type: text/plain; charset=utf-8\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n"
                         f"{challenge}\r\n")
            writer.write(head_text.encode() + body)
            await writer.drain()
            return
        log(f"allowed {head.method} {host}:{port}")
        if head.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        else:
            upstream_writer.write(payload)
        await _pipe_both(reader, writer, upstream_reader, upstream_writer)

    async def _connect(self, addresses: Sequence[str], port: int,
                       host: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        last: OSError | None = None
        for address in addresses:
            try:
                return await asyncio.wait_for(asyncio.open_connection(address, port),
                                              CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                last = exc if isinstance(exc, OSError) else OSError(f"timed out: {exc}")
        raise Refused(502, "Bad Gateway", f"cannot connect to {host}:{port}: {last}")


async def _pipe_both(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter,
                     upstream_reader: asyncio.StreamReader,
                     upstream_writer: asyncio.StreamWriter) -> None:
    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(65536):
                sink.write(chunk)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if sink.can_write_eof():
                try:
                    sink.write_eof()
                except (ConnectionError, OSError):
                    pass

    # the client may half-close and still read; once the upstream is done, so is the client
    outgoing = asyncio.ensure_future(pipe(client_reader, upstream_writer))
    try:
        await pipe(upstream_reader, client_writer)
    finally:
        outgoing.cancel()
        upstream_writer.close()


def log(line: str) -> None:
    print(f"egress: {line}", file=sys.stderr, flush=True)


async def serve(policy: EgressPolicy, token: str, host: str, port: int) -> asyncio.Server:
    proxy = EgressProxy(policy, token)
    return await asyncio.start_server(proxy.handle, host, port, limit=MAX_HEAD)


def _split(value: str | None) -> list[str]:
    return [part for part in (value or "").split(",") if part.strip()]


async def _main() -> None:
    token = os.environ.get("AGENTENV_EGRESS_TOKEN", "")
    if not token:
        sys.exit("egress proxy: AGENTENV_EGRESS_TOKEN is not set")
    policy = EgressPolicy.from_lists(_split(os.environ.get("AGENTENV_EGRESS_HOSTS")),
                                     _split(os.environ.get("AGENTENV_EGRESS_CIDRS")))
    port = int(os.environ.get("AGENTENV_EGRESS_PORT") or DEFAULT_PORT)
    server = await serve(policy, token, "0.0.0.0", port)
    log(f"listening on {port}; allowed: {policy.describe()}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(_main())

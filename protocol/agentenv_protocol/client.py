"""Async clients: MCP over streamable HTTP, the JSON-RPC data plane, and the card.

All of them reuse one ``aiohttp.ClientSession`` (given, or owned and closed by the client), so
a caller making many calls (the gateway above all) pays for connections once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import attrs

from .card import CARD_PATH, EnvironmentCard, ToolInfo, tool_from_mcp
from .errors import ProtocolError, TransportError
from .http1 import ConnectFailed, Http1Pool
from .parts import Part, part_from_wire, part_to_wire
from .wire import LATEST_VERSION, SESSION_HEADER, VERSION_HEADER

ACCEPT_BOTH = "application/json, text/event-stream"

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class _LowerHeaders(dict[str, str]):
    """Headers keyed in lower case (as :mod:`.http1` gives them), looked up in any case."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


class SessionExpired(TransportError):
    """The server no longer knows our ``Mcp-Session-Id`` (it restarted, or dropped it)."""


@attrs.define(frozen=True)
class ToolResult:
    """A ``tools/call`` result; ``raw`` is the result object as received."""

    content: list[dict[str, Any]]
    is_error: bool
    structured_content: dict[str, Any] | None
    raw: dict[str, Any]

    @property
    def isError(self) -> bool:
        return self.is_error

    @property
    def text(self) -> str:
        """The text contents joined by newlines."""
        return "\n".join(c.get("text", "") for c in self.content if c.get("type") == "text")

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> ToolResult:
        return cls(raw.get("content") or [], bool(raw.get("isError")),
                   raw.get("structuredContent"), raw)


def _new_session(timeout: float) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
        timeout=aiohttp.ClientTimeout(total=timeout),
    )


class _HttpOwner:
    """Owns or borrows the aiohttp session; shared by the clients below."""

    def __init__(self, session: aiohttp.ClientSession | None, timeout: float) -> None:
        self._given = session
        self._own: aiohttp.ClientSession | None = None
        self.timeout = timeout

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._given is not None:
            return self._given
        if self._own is None or self._own.closed:
            self._own = _new_session(self.timeout)
        return self._own

    async def close_http(self) -> None:
        if self._own is not None:
            await self._own.close()
            self._own = None


_ONE_EVENT = b"event: message\ndata: "


def _parse_sse(raw: bytes) -> list[Any]:
    """The JSON payloads of an SSE body's ``data`` fields, one per event."""
    if raw.startswith(_ONE_EVENT) and raw.endswith(b"\n\n") and raw.count(b"\n") == 3:
        return [json.loads(raw[len(_ONE_EVENT):-2])]  # one event, as servers mostly send
    messages = []
    for block in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") if line.startswith("data:") else None
                for line in block.split("\n")]
        payload = "\n".join(d for d in data if d is not None)
        if payload:
            messages.append(json.loads(payload))
    return messages


class McpClient(_HttpOwner):
    """An MCP client over streamable HTTP with a session (``async with McpClient(url) as c``).

    Handles SSE and JSON replies; when the server forgets the session (e.g. it restarted) the
    next request re-initialises once and is retried.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        session: aiohttp.ClientSession | None = None,
        protocol_version: str = LATEST_VERSION,
        accept: str = ACCEPT_BOTH,
        client_name: str = "agentenv-protocol",
        pool: Http1Pool | None = None,
    ) -> None:
        super().__init__(session, timeout)
        self.url = url
        #: POSTs go through this lean pool when given (the gateway's calls to its children).
        self.pool = pool
        parts = urlsplit(url)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = dict(headers or {})
        self.requested_version = protocol_version
        self.accept = accept
        self.client_name = client_name
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] | None = None
        self._ids = itertools.count(1)
        self._connect_lock = asyncio.Lock()
        self._epoch = 0

    async def __aenter__(self) -> McpClient:
        await self.connect()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- session ----------------------------------------------------------------------------
    async def connect(self) -> dict[str, Any]:
        """``initialize`` then ``notifications/initialized``; returns the initialize result."""
        self.session_id = None
        result, headers = await self._post(
            "initialize",
            {"protocolVersion": self.requested_version, "capabilities": {},
             "clientInfo": {"name": self.client_name, "version": "0.1.0"}},
            timeout=None,
        )
        self.session_id = headers.get(SESSION_HEADER)
        self.protocol_version = result.get("protocolVersion")
        self.server_info = result.get("serverInfo")
        self._epoch += 1
        await self.notify("notifications/initialized")
        return result

    async def _reconnect(self, seen_epoch: int) -> None:
        async with self._connect_lock:
            if self._epoch == seen_epoch:  # nobody reconnected meanwhile
                await self.connect()

    async def close(self) -> None:
        """End the session (DELETE, best effort) and close an owned HTTP session."""
        if self.session_id is not None:
            try:
                async with self.http.delete(self.url, headers=self._headers(),
                                            timeout=aiohttp.ClientTimeout(total=5)):
                    pass
            except (TimeoutError, aiohttp.ClientError):
                pass
            self.session_id = None
        await self.close_http()

    # -- requests ---------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        h = {"Accept": self.accept, "Content-Type": "application/json", **self.headers}
        if self.session_id:
            h[SESSION_HEADER] = self.session_id
        if self.protocol_version:
            h[VERSION_HEADER] = self.protocol_version
        return h

    async def _post(self, method: str, params: Mapping[str, Any] | None, *,
                    timeout: float | None, notify: bool = False) -> tuple[Any, Mapping[str, str]]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        msg_id = None
        if not notify:
            msg_id = next(self._ids)
            msg["id"] = msg_id
        if params is not None:
            msg["params"] = params
        total = self.timeout if timeout is None else timeout
        if self.pool is not None:
            try:
                reply = await self.pool.post(self._path, _dumps(msg).encode(), self._headers(),
                                             timeout=total)
            except TimeoutError:
                raise TransportError(f"{method}: no answer from {self.url} within {total:g}s") \
                    from None
            except ConnectionError as exc:
                raise TransportError(f"{method}: cannot reach {self.url}: {exc}",
                                     unsent=isinstance(exc, ConnectFailed)) from None
            lower = _LowerHeaders(reply.headers)
            if reply.status == 202 or notify:
                return None, lower
            return self._reply(method, msg_id, reply.status, reply.header("Content-Type"),
                               reply.body, lower)
        try:
            async with self.http.post(self.url, data=_dumps(msg), headers=self._headers(),
                                      timeout=aiohttp.ClientTimeout(total=total)) as resp:
                status = resp.status
                if status == 202 or notify:
                    return None, resp.headers
                ctype = resp.headers.get("Content-Type", "")
                body = await resp.read()
                headers = resp.headers
        except TimeoutError:
            raise TransportError(f"{method}: no answer from {self.url} within {total:g}s") \
                from None
        except aiohttp.ClientError as exc:
            raise TransportError(f"{method}: cannot reach {self.url}: {exc}") from None
        return self._reply(method, msg_id, status, ctype, body, headers)

    def _reply(self, method: str, msg_id: Any, status: int, ctype: str, body: bytes,
               headers: Mapping[str, str]) -> tuple[Any, Mapping[str, str]]:
        """The ``result`` of a reply to ``msg_id`` (ProtocolError on a JSON-RPC error)."""
        if status == 404 and self.session_id and method != "initialize":
            raise SessionExpired(f"{method}: session expired at {self.url}", 404)
        try:
            if ctype.startswith("text/event-stream"):
                candidates = _parse_sse(body)
            elif body:
                loaded = json.loads(body)
                candidates = loaded if isinstance(loaded, list) else [loaded]
            else:
                candidates = []
        except (ValueError, UnicodeDecodeError):
            candidates = []
        for reply in candidates:
            if isinstance(reply, dict) and reply.get("id") == msg_id and (
                    "result" in reply or "error" in reply):
                if "error" in reply:
                    err = reply["error"] or {}
                    raise ProtocolError(err.get("code", 0), err.get("message", ""),
                                        err.get("data"))
                return reply["result"], headers
        raise TransportError(
            f"{method}: HTTP {status} from {self.url} without a JSON-RPC reply: "
            f"{body[:200].decode('utf-8', 'replace')}", status)

    async def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                      timeout: float | None = None) -> Any:
        """Send one request and return its ``result`` (ProtocolError on a JSON-RPC error)."""
        if self.session_id is None:
            await self._reconnect(self._epoch)
        epoch = self._epoch
        try:
            result, _ = await self._post(method, params, timeout=timeout)
        except SessionExpired:
            await self._reconnect(epoch)
            result, _ = await self._post(method, params, timeout=timeout)
        return result

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        await self._post(method, params, timeout=None, notify=True)

    async def ping(self) -> None:
        await self.request("ping")

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool, following ``nextCursor`` pages."""
        return [tool_from_mcp(t) for t in await self.list_tools_raw()]

    async def list_tools_raw(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = await self.request("tools/list", {"cursor": cursor} if cursor else None)
            tools.extend(result.get("tools") or [])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                        meta: Mapping[str, Any] | None = None,
                        timeout: float | None = None) -> ToolResult:
        """Call a tool; a tool-level failure is a ToolResult with ``is_error`` set."""
        return ToolResult.from_wire(
            await self.call_tool_raw(name, arguments, meta=meta, timeout=timeout))

    async def call_tool_raw(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                            meta: Mapping[str, Any] | None = None,
                            timeout: float | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if meta:
            params["_meta"] = dict(meta)
        return await self.request("tools/call", params, timeout=timeout)


class ToolSessionError(RuntimeError):
    """An MCP-level failure of a :class:`ToolSession` call (a JSON-RPC error, an HTTP error,
    an unreadable reply); a tool that fails is not one: its result has ``isError`` set."""


class ToolSession:
    """The reference's MCP session on an env's ``mcp_url`` (a trainer's or harness's own loop
    lists and calls tools with it): ``async with ToolSession(mcp_url=url, role="r") as s``.

    A thin shape over :class:`McpClient`; failures are :class:`ToolSessionError`."""

    def __init__(self, *, mcp_url: str, role: str | None = None,
                 headers: Mapping[str, str] | None = None, timeout: float = 600.0) -> None:
        from .wire import ROLE_HEADER

        self.mcp_url = mcp_url
        self.timeout = timeout
        self._headers = {**(headers or {}), **({ROLE_HEADER: role} if role else {})}
        self._client: McpClient | None = None

    @property
    def session_id(self) -> str | None:
        return self._client.session_id if self._client else None

    @property
    def protocol_version(self) -> str | None:
        return self._client.protocol_version if self._client else None

    async def __aenter__(self) -> ToolSession:
        return await self.open()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def open(self) -> ToolSession:
        """Start a new MCP session, ending the one held, if any."""
        await self.close()
        client = McpClient(self.mcp_url, headers=self._headers, timeout=self.timeout)
        try:
            await client.connect()
        except (ProtocolError, TransportError) as exc:
            await client.close()
            raise ToolSessionError(f"initialize: {exc}") from exc
        self._client = client
        return self

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _open(self) -> McpClient:
        if self._client is None:
            raise ToolSessionError("the session is not open: use 'async with' or open()")
        return self._client

    async def list_tools(self) -> list[ToolInfo]:
        try:
            return await self._open().list_tools()
        except (ProtocolError, TransportError) as exc:
            raise ToolSessionError(f"tools/list: {exc}") from exc

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None
                        ) -> ToolResult:
        try:
            return await self._open().call_tool(name, arguments)
        except (ProtocolError, TransportError) as exc:
            raise ToolSessionError(f"tools/call {name}: {exc}") from exc


class DataPlaneClient(_HttpOwner):
    """The JSON-RPC data plane of one env (``data/reset``, ``data/add``, ``data/get``)."""

    def __init__(self, base_url: str, *, path: str = "/agentenv",
                 headers: Mapping[str, str] | None = None, timeout: float = 30.0,
                 session: aiohttp.ClientSession | None = None) -> None:
        super().__init__(session, timeout)
        self.url = base_url.rstrip("/") + path
        self.headers = dict(headers or {})
        self._ids = itertools.count(1)

    async def __aenter__(self) -> DataPlaneClient:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.close_http()

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """One JSON-RPC call; returns ``result`` or raises ProtocolError with the exact code."""
        msg = {"jsonrpc": "2.0", "id": next(self._ids), "method": method,
               "params": dict(params or {})}
        try:
            async with self.http.post(self.url, data=_dumps(msg),
                                      headers={"Content-Type": "application/json",
                                               **self.headers}) as resp:
                body = await resp.read()
                status = resp.status
        except TimeoutError:
            raise TransportError(f"{method}: no answer from {self.url}") from None
        except aiohttp.ClientError as exc:
            raise TransportError(f"{method}: cannot reach {self.url}: {exc}") from None
        try:
            reply = json.loads(body)
        except ValueError:
            raise TransportError(f"{method}: HTTP {status}, not JSON", status) from None
        if not isinstance(reply, dict):
            raise TransportError(f"{method}: HTTP {status}, unexpected reply", status)
        if "error" in reply:
            err = reply["error"] or {}
            raise ProtocolError(err.get("code", 0), err.get("message", ""), err.get("data"))
        if "result" not in reply:
            raise TransportError(f"{method}: HTTP {status}, no result", status)
        return reply["result"]

    async def reset(self) -> None:
        await self.call("data/reset", {})

    async def add(self, parts: Sequence[Part | Mapping[str, Any] | str]) -> None:
        await self.call("data/add", {"parts": [part_to_wire(p) for p in parts]})

    async def get(self, *, write_namespace: Mapping[str, Any] | None = None) -> list[Part]:
        params = {"write_namespace": dict(write_namespace)} if write_namespace else {}
        result = await self.call("data/get", params)
        return [part_from_wire(p, i) for i, p in enumerate(result.get("parts") or [])]


async def fetch_card(base_url: str, *, headers: Mapping[str, str] | None = None,
                     session: aiohttp.ClientSession | None = None,
                     timeout: float = 10.0) -> EnvironmentCard:
    """GET ``/.well-known/agent-env.json`` under ``base_url`` and parse it."""
    return EnvironmentCard.from_wire(
        await fetch_card_raw(base_url, headers=headers, session=session, timeout=timeout))


async def fetch_card_raw(base_url: str, *, headers: Mapping[str, str] | None = None,
                         session: aiohttp.ClientSession | None = None,
                         timeout: float = 10.0) -> dict[str, Any]:
    owner = _HttpOwner(session, timeout)
    url = base_url.rstrip("/") + CARD_PATH
    try:
        async with owner.http.get(url, headers=dict(headers or {}),
                                  timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            if resp.status != 200:
                raise TransportError(f"card: HTTP {resp.status} from {url}", resp.status)
            data = await resp.json(content_type=None)
    except TimeoutError:
        raise TransportError(f"card: no answer from {url} within {timeout:g}s") from None
    except aiohttp.ClientError as exc:
        raise TransportError(f"card: cannot reach {url}: {exc}") from None
    finally:
        await owner.close_http()
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise TransportError(f"card: {url} did not answer a card with a name")
    return data

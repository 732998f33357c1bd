"""The model gateway: one model endpoint per run, in front of the real upstream.

Agents get the gateway's URL and a per-run token, never the provider's key; the gateway
forwards each call to its :class:`Upstream` (:class:`HttpUpstream` with the real key, or the
scripted model, :class:`agentenv_agents.scripted.ScriptedUpstream`) and records it
(:class:`agentenv_agents.records.ModelCall`).

Routes (every one but ``/healthz`` needs the token, as ``Authorization: Bearer <token>``,
Anthropic's ``x-api-key: <token>`` or Google's ``x-goog-api-key: <token>`` / ``?key=<token>``;
a wrong or missing token gets 401 in the route's own error shape)::

    POST /v1/chat/completions          OpenAI Chat Completions   (also /chat/completions)
    POST /v1/responses                 OpenAI Responses          (also /responses)
    POST /v1/messages                  Anthropic Messages
    POST /v1/messages/count_tokens     Anthropic token counting (passed on, not recorded)
    POST /v1beta/models/M:generateContent        Gemini API      (also /v1/models/...)
    POST /v1beta/models/M:streamGenerateContent  Gemini API, streamed with ?alt=sse
    POST /v1beta/models/M:countTokens            Gemini token counting (passed on, not recorded)
    GET  /v1/models                    the upstream's models     (also /models)
    GET  /healthz                      200 "ok", no token: for readiness probes

So an OpenAI client's base URL is ``<url>/v1``, and an Anthropic or Gemini client's is ``<url>``
(the SDKs add ``/v1/messages`` or ``/v1beta/models/...`` themselves);
:meth:`ModelGateway.client_env` spells them out. There is deliberately no ``/anthropic/...``
prefix: the paths of the four APIs do not collide. A Gemini call names its model in the path,
not the body; aliases apply to it there.

Each model call streams when its body says ``"stream": true``, in the API's own event format,
passed through chunk by chunk. For Chat Completions streams the gateway asks the upstream for
usage (``stream_options.include_usage``) so every call has token counts, and drops that extra
usage-only chunk again when the agent had not asked for it. Failures keep the upstream's
status (401, 429, 5xx pass through with their body and ``retry-after``); an unreachable
upstream is a 502 saying so. The record's ``error`` says which side failed.

Overhead is kept to parsing the request once (the gateway must read ``stream`` and ``model``),
one pooled ``aiohttp.ClientSession`` per upstream, and no per-chunk parsing: a stream's record
is assembled from its bytes after the last one has been sent.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import aiohttp
import attrs
from aiohttp import web

from .records import Api, CallRecorder, ModelCall
from .wire import assemble_stream, error_body, error_message, sse, summarize

JSON = "application/json"
#: The largest request body an agent may send (413 beyond): images in a conversation are
#: megabytes, not tens of them, and every call is recorded whole.
MAX_BODY_BYTES = 32 * 1024 * 1024
#: Request headers passed on to the upstream (auth is replaced, everything else dropped).
FORWARD_REQUEST_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "accept")
#: Response headers passed back to the agent: the ones clients act on (retries, request ids).
_KEEP_RESPONSE = ("retry-after", "request-id", "x-request-id", "openai-", "anthropic-",
                  "x-ratelimit-")
_EVENT_END = re.compile(rb"\r?\n\r?\n")
_USAGE_ONLY = (b'"choices":[]', b'"choices": []')


@attrs.define
class UpstreamRequest:
    """One call as the gateway hands it on. ``path`` is relative to the API root (``/messages``,
    ``/chat/completions``, ``/models``); ``raw`` is the exact body to send (re-encoded only when
    the gateway changed ``body``); ``headers`` are the agent's forwardable headers."""

    api: Api
    path: str
    method: str = "POST"
    body: dict[str, Any] | None = None
    raw: bytes = b""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    stream: bool = False
    #: the model asked for, after aliases: the body's ``model``, or a Gemini call's path's
    model: str | None = None
    #: the upstream key this caller's calls go with, over the gateway's own (a judge's
    #: ``--judge-litellm-api-key``); never shown
    api_key: str | None = attrs.field(default=None, repr=False)


@attrs.define
class UpstreamReply:
    """What an upstream answered: ``body`` or, for a stream, ``chunks``. ``error`` is set when
    the answer is not the upstream model's own (unreachable, the scripted model refusing), and
    says so in one line; ``release`` frees the connection behind ``chunks``."""

    status: int
    headers: dict[str, str] = attrs.field(factory=dict)
    body: bytes | None = None
    chunks: AsyncIterator[bytes] | None = None
    error: str | None = None
    release: Callable[[], Awaitable[None] | None] | None = None


class Upstream(Protocol):
    """Where the gateway sends model calls. ``name`` goes into records (never a secret)."""

    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def send(self, request: UpstreamRequest) -> UpstreamReply: ...


def json_reply(status: int, body: Any, *, error: str | None = None) -> UpstreamReply:
    return UpstreamReply(status, {"Content-Type": JSON},
                         json.dumps(body, separators=(",", ":")).encode(), error=error)


class HttpUpstream:
    """An OpenAI-, Anthropic- or Gemini-compatible HTTP server (the provider, LiteLLM, vLLM...).

    ``base_url`` is the API root as its SDKs take it; a trailing ``/v1`` is understood
    (``https://api.openai.com/v1`` and ``https://api.anthropic.com`` both work): a call to the
    gateway's ``/v1/<path>`` goes to ``<base_url>/<path>`` when the base ends in ``/v1``, else to
    ``<base_url>/v1/<path>``. A Gemini call goes to ``<base_url minus /v1>/v1beta/<path>``
    (``https://generativelanguage.googleapis.com``). The key goes as ``x-api-key`` (plus
    ``anthropic-version`` if the agent sent none) on Anthropic routes, as ``x-goog-api-key`` on
    Gemini routes and as ``Authorization: Bearer`` on OpenAI routes; ``headers`` (``[model]
    headers``) go on every call.
    """

    def __init__(self, base_url: str, api_key: str | None = None,
                 headers: Mapping[str, str] | None = None, *, connect_timeout: float = 10.0,
                 read_timeout: float = 600.0) -> None:
        base = base_url.rstrip("/")
        self.name = base
        self._root = base if base.endswith("/v1") else base + "/v1"
        self._gemini_root = self._root.removesuffix("/v1") + "/v1beta"
        self._api_key = api_key
        self._headers = dict(headers or {})
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout,
                                              sock_read=read_timeout)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"HttpUpstream({self.name!r})"

    async def start(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout,
                                                  auto_decompress=True)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _auth(self, request: UpstreamRequest) -> dict[str, str]:
        headers = dict(request.headers)
        headers.update(self._headers)
        headers["Content-Type"] = JSON
        anthropic = request.api == "messages"
        if anthropic:
            headers.setdefault("anthropic-version", "2023-06-01")
        key = request.api_key or self._api_key
        if key:
            if anthropic:
                headers["x-api-key"] = key
            elif request.api == "generate_content":
                headers["x-goog-api-key"] = key
            else:
                headers["Authorization"] = f"Bearer {key}"
        return headers

    async def send(self, request: UpstreamRequest) -> UpstreamReply:
        await self.start()
        assert self._session is not None
        root = self._gemini_root if request.api == "generate_content" else self._root
        url = root + request.path
        try:
            resp = await self._session.request(
                request.method, url, data=request.raw if request.method == "POST" else None,
                headers=self._auth(request))
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            why = f"{type(exc).__name__}: {exc}".rstrip(": ")
            message = f"model upstream unreachable: {self.name}: {why}"
            return json_reply(502, error_body(request.api, 502, message),
                              error=f"upstream unreachable: {self.name}: {why}")
        headers = {k: v for k, v in resp.headers.items()
                   if k.lower() == "content-type" or k.lower().startswith(_KEEP_RESPONSE)}
        is_stream = resp.headers.get("Content-Type", "").startswith("text/event-stream")
        if request.stream and resp.status < 400 and is_stream:
            return UpstreamReply(resp.status, headers, chunks=resp.content.iter_any(),
                                 release=resp.release)
        try:
            body = await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            message = f"model upstream broke off its answer: {self.name}: {exc}"
            return json_reply(502, error_body(request.api, 502, message),
                              error=f"upstream unreachable: {message}")
        finally:
            resp.release()
        return UpstreamReply(resp.status, headers, body)


def _host_for_url(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


class ModelGateway:
    """One authenticated model endpoint in front of ``upstream``; see the module docstring.

    ``aliases`` maps model names an agent may ask for (``"agent"``, ``"judge"``, ``"default"``)
    to the upstream's names, so ``[model] default`` / ``roles`` apply without the agent knowing
    them. ``recorder`` receives a :class:`ModelCall` per model call (a fresh
    :class:`CallRecorder` if none is given).
    """

    def __init__(self, upstream: Upstream, *, token: str, host: str = "0.0.0.0", port: int = 0,
                 recorder: CallRecorder | None = None,
                 aliases: Mapping[str, str] | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        if not token:
            raise ValueError("the model gateway needs a token")
        self.upstream = upstream
        self.recorder = recorder if recorder is not None else CallRecorder()
        self.aliases = dict(aliases or {})
        self.host = host
        self.port = port
        self.url: str | None = None
        self._token = token.encode()
        #: further tokens, each naming who calls with it (one per agent: its calls are its own)
        self._callers: dict[bytes, str] = {}
        #: a caller's own upstream key, by caller name
        self._caller_keys: dict[str, str] = {}
        self._max_body = max_body_bytes
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self._max_body)
        add = app.router.add_route
        for prefix in ("/v1", ""):
            add("POST", f"{prefix}/chat/completions", self._chat)
            add("POST", f"{prefix}/responses", self._responses)
            add("GET", f"{prefix}/models", self._models)
        add("POST", "/v1/messages", self._messages)
        add("POST", "/v1/messages/count_tokens", self._count_tokens)
        for version in ("v1beta", "v1"):
            add("POST", f"/{version}/models/{{target:.+}}", self._gemini)
        add("GET", "/healthz", self._health)
        return app

    async def start(self) -> str:
        """Serve; returns the base URL (``http://127.0.0.1:<port>`` when bound to all hosts)."""
        await self.upstream.start()
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(1024)
        sock.setblocking(False)
        await web.SockSite(runner, sock).start()
        self._runner = runner
        self.port = sock.getsockname()[1]
        self.url = f"http://{_host_for_url(self.host)}:{self.port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.upstream.close()

    async def __aenter__(self) -> ModelGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def client_env(self, base_url: str | None = None) -> dict[str, str]:
        """Variables that point the usual SDKs and CLIs at this gateway with the run token:
        ``base_url`` is how the agent reaches the gateway (default: :attr:`url`)."""
        base = (base_url or self.url or "").rstrip("/")
        token = self._token.decode()
        return {
            "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": token,
            "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": token,
            "LITELLM_BASE_URL": f"{base}/v1", "LITELLM_API_KEY": token,
            "GOOGLE_GEMINI_BASE_URL": base, "GEMINI_API_KEY": token,
        }

    # -- routes ----------------------------------------------------------------------------

    def add_caller(self, name: str, token: str, upstream_key: str | None = None) -> None:
        """Accept ``token`` too; calls made with it are recorded with ``caller = name``, and
        go upstream with ``upstream_key`` when given (else the gateway's own key)."""
        if not token or token.encode() == self._token:
            raise ValueError("a caller's token must be set and differ from the run token")
        self._callers[token.encode()] = name
        if upstream_key:
            self._caller_keys[name] = upstream_key

    def _key_for(self, request: web.Request) -> str | None:
        caller = self._caller(request)
        return self._caller_keys.get(caller) if caller else None

    def _caller(self, request: web.Request) -> str | None:
        """Who calls: ``""`` for the run token, a caller's name for its token, None if
        neither (refused)."""
        given = request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
        if given is None:
            auth = request.headers.get("Authorization", "")
            given = auth[7:] if auth[:7].lower() == "bearer " else request.query.get("key")
        if given is None:
            return None
        raw = given.strip().encode()
        if hmac.compare_digest(raw, self._token):
            return ""
        for token, name in self._callers.items():
            if hmac.compare_digest(raw, token):
                return name
        return None

    def _authorized(self, request: web.Request) -> bool:
        return self._caller(request) is not None

    @staticmethod
    def _refuse(api: Api, status: int, message: str) -> web.Response:
        return web.json_response(error_body(api, status, message), status=status)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._call(request, "chat_completions", "/chat/completions")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._call(request, "responses", "/responses")

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._call(request, "messages", "/messages")

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        """``models/<model>:<method>``: the model is in the path (after aliases), streaming is
        ``streamGenerateContent`` with ``alt=sse`` (without it Gemini answers one JSON array,
        passed on whole)."""
        model, _, method = request.match_info["target"].rpartition(":")
        if method == "countTokens" and model:
            if not self._authorized(request):
                return self._refuse("generate_content", 401,
                                    "model gateway: wrong or missing token")
            raw = await request.read()
            body = _json_object(raw)
            if body is None:
                return self._refuse("generate_content", 400,
                                    "model gateway: the body is not a JSON object")
            reply = await self.upstream.send(UpstreamRequest(
                "generate_content", f"/models/{self.aliases.get(model, model)}:countTokens",
                body=body, raw=raw, headers=_forwardable(request),
                model=self.aliases.get(model, model), api_key=self._key_for(request)))
            return await self._send_plain(request, reply)
        if method not in ("generateContent", "streamGenerateContent") or not model:
            return self._refuse("generate_content", 404, f"model gateway: no Gemini method "
                                f"{request.match_info['target']!r} (it serves models/M:"
                                "generateContent, :streamGenerateContent and :countTokens)")
        sse_stream = method == "streamGenerateContent" and request.query.get("alt") == "sse"
        return await self._call(request, "generate_content", method, model=model,
                                stream=sse_stream)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
        api: Api = "messages" if anthropic else "chat_completions"
        if not self._authorized(request):
            return self._refuse(api, 401, "model gateway: wrong or missing token")
        reply = await self.upstream.send(UpstreamRequest(
            api, "/models", "GET", headers=_forwardable(request), raw=b"",
            api_key=self._key_for(request)))
        return await self._send_plain(request, reply)

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._refuse("messages", 401, "model gateway: wrong or missing token")
        raw = await request.read()
        body = _json_object(raw)
        if body is None:
            return self._refuse("messages", 400, "model gateway: the body is not a JSON object")
        body, raw = self._apply_aliases(body, raw)
        reply = await self.upstream.send(UpstreamRequest(
            "messages", "/messages/count_tokens", body=body, raw=raw,
            headers=_forwardable(request), model=_model_of(body),
            api_key=self._key_for(request)))
        return await self._send_plain(request, reply)

    async def _send_plain(self, request: web.Request, reply: UpstreamReply) -> web.StreamResponse:
        try:
            body = reply.body
            if body is None and reply.chunks is not None:
                body = b"".join([chunk async for chunk in reply.chunks])
        finally:
            await _release(reply)
        return web.Response(status=reply.status, body=body or b"", headers=reply.headers)

    def _apply_aliases(self, body: dict[str, Any], raw: bytes) -> tuple[dict[str, Any], bytes]:
        model = body.get("model")
        if isinstance(model, str) and model in self.aliases:
            body = {**body, "model": self.aliases[model]}
            raw = json.dumps(body, separators=(",", ":")).encode()
        return body, raw

    # -- one model call --------------------------------------------------------------------

    async def _call(self, request: web.Request, api: Api, path: str, *, model: str | None = None,
                    stream: bool | None = None) -> web.StreamResponse:
        """One recorded model call. A Gemini call passes its path's ``model`` and whether it
        streams, and ``path`` is its method: the upstream path is built after aliases."""
        started = time.time()
        t0 = time.perf_counter()
        call = ModelCall(api=api, upstream=self.upstream.name, requested_model=None, model=None,
                         stream=False, status=0, started_at=started)
        caller = self._caller(request)
        if caller is None:
            refusal = self._refuse(api, 401, "model gateway: wrong or missing token")
            return self._finish(call, t0, refusal, "gateway: wrong or missing token")
        call.caller = caller or None
        raw = sent = await request.read()
        body = _json_object(raw)
        if body is None:
            return self._finish(call, t0, self._refuse(
                api, 400, "model gateway: the body is not a JSON object"),
                "gateway: the body is not a JSON object")
        call.request = body
        if model is not None:  # Gemini: the model is the path's
            call.requested_model = model
            call.model = self.aliases.get(model, model)
            path = f"/models/{call.model}:{path}" + ("?alt=sse" if stream else "")
        else:
            call.requested_model = body.get("model") if isinstance(body.get("model"), str) \
                else None
            body, raw = self._apply_aliases(body, raw)
            if isinstance(body.get("model"), str):
                call.model = body["model"]  # asked of the upstream; the answer may refine it
        stream = call.stream = body.get("stream") is True if stream is None else stream
        strip_usage = False
        if api == "chat_completions" and stream:
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage")):
                strip_usage = True
                body, raw = _with_usage(body, raw)
        reply = await self.upstream.send(UpstreamRequest(
            api, path, body=body, raw=raw, headers=_forwardable(request), stream=stream,
            model=call.model, api_key=self._caller_keys.get(caller) if caller else None))
        call.status = reply.status
        if reply.chunks is None:
            return await self._answer_whole(request, call, t0, reply, sent)
        return await self._answer_stream(request, call, t0, reply, strip_usage, sent)

    async def _answer_whole(self, request: web.Request, call: ModelCall, t0: float,
                            reply: UpstreamReply, sent: bytes) -> web.StreamResponse:
        body = reply.body or b""
        response = web.Response(status=reply.status, body=body, headers=reply.headers)
        error: str | None = None
        try:
            await response.prepare(request)
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError) as exc:
            error = f"gateway: the agent went away before the answer was sent ({exc!r})"
            if isinstance(exc, asyncio.CancelledError):
                self._finish(call, t0, None, error, sent=sent)
                raise
        parsed = _json_any(body)
        call.response = parsed if parsed is not None else body.decode("utf-8", "replace")
        summary = summarize(call.api, parsed)
        _apply(call, summary)
        if reply.error:
            error = reply.error
        elif reply.status >= 400:
            message = error_message(parsed) or body[:300].decode("utf-8", "replace")
            error = f"upstream answered HTTP {reply.status}: {message}"
        return self._finish(call, t0, response, error, sent=sent)

    async def _answer_stream(self, request: web.Request, call: ModelCall, t0: float,
                             reply: UpstreamReply, strip_usage: bool,
                             sent: bytes) -> web.StreamResponse:
        assert reply.chunks is not None
        headers = {**reply.headers, "Cache-Control": "no-cache"}
        headers.setdefault("Content-Type", "text/event-stream")
        response = web.StreamResponse(status=reply.status, headers=headers)
        seen: list[bytes] = []
        pending = b""
        error: str | None = None
        chunks = reply.chunks.__aiter__()
        try:
            await response.prepare(request)
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    error = (f"upstream unreachable: the stream broke off "
                             f"({type(exc).__name__}: {exc})")
                    # the blank line ends whatever partial event was already sent
                    await response.write(pending + b"\n\n" + stream_error_event(call.api, error))
                    pending = b""
                    break
                if call.first_byte_ms is None:
                    call.first_byte_ms = (time.perf_counter() - t0) * 1000
                seen.append(chunk)
                if strip_usage:
                    pending += chunk
                    chunk, pending = _drop_usage_only(pending)
                    if not chunk:
                        continue
                await response.write(chunk)
            if pending:
                await response.write(pending)
            await response.write_eof()
        except ConnectionError as exc:
            error = error or f"gateway: the agent went away mid-stream ({exc!r})"
        except asyncio.CancelledError:
            self._finish(call, t0, None, "gateway: the agent went away mid-stream",
                         b"".join(seen), sent=sent)
            raise
        finally:
            await _release(reply)
        return self._finish(call, t0, response, error or reply.error, b"".join(seen),
                            sent=sent)

    def _finish(self, call: ModelCall, t0: float, response: web.StreamResponse | None,
                error: str | None, streamed: bytes | None = None, *,
                sent: bytes | None = None) -> web.StreamResponse:
        """Record ``call`` (``sent``: the body the agent sent, which ``call.request`` was
        parsed from) and return ``response``."""
        call.latency_ms = (time.perf_counter() - t0) * 1000
        if call.first_byte_ms is None:
            call.first_byte_ms = call.latency_ms
        if response is not None and call.status == 0:
            call.status = response.status
        if streamed is not None:
            assembled, summary = assemble_stream(call.api, streamed)
            call.response = assembled
            _apply(call, summary)
            error = error or (f"upstream: error event in the stream: {summary.error}"
                              if summary.error else None)
        call.error = error
        self.recorder.record(call, sent)
        return response  # type: ignore[return-value]


def _apply(call: ModelCall, summary: Any) -> None:
    call.model = summary.model or call.model
    call.input_tokens = summary.input_tokens
    call.output_tokens = summary.output_tokens
    call.finish_reason = summary.finish_reason
    call.usage = summary.usage


def stream_error_event(api: Api, message: str) -> bytes:
    """The event that tells an agent's SDK a stream failed after it had started: Anthropic's
    ``error`` event; for OpenAI a data line carrying ``error`` (what its SDKs raise on), with
    the Responses ``error`` event's own fields alongside."""
    if api == "messages":
        return sse(error_body(api, 502, message), "error")
    body = error_body(api, 502, message)
    if api == "responses":
        return sse({"type": "error", "code": "server_error", "message": message,
                    "param": None, **body}, "error")
    return sse(body)


def _with_usage(body: dict[str, Any], raw: bytes) -> tuple[dict[str, Any], bytes]:
    """``body`` asking for stream usage; without ``stream_options`` the key is spliced into the
    raw bytes (no re-encoding of a possibly large history)."""
    options = body.get("stream_options")
    body = {**body, "stream_options": {**(options if isinstance(options, dict) else {}),
                                       "include_usage": True}}
    stripped = raw.lstrip()
    if options is None and stripped.startswith(b"{"):
        return body, b'{"stream_options":{"include_usage":true},' + stripped[1:]
    return body, json.dumps(body, separators=(",", ":")).encode()


def _drop_usage_only(buffer: bytes) -> tuple[bytes, bytes]:
    """Split ``buffer`` into complete events to send (minus usage-only chunks) and the rest."""
    ends = list(_EVENT_END.finditer(buffer))
    if not ends:
        return b"", buffer
    done, rest = buffer[:ends[-1].end()], buffer[ends[-1].end():]
    if not any(marker in done for marker in _USAGE_ONLY):
        return done, rest
    kept: list[bytes] = []
    start = 0
    for end in ends:
        event = done[start:end.end()]
        start = end.end()
        if not (any(marker in event for marker in _USAGE_ONLY) and b'"usage"' in event):
            kept.append(event)
    return b"".join(kept), rest


async def _release(reply: UpstreamReply) -> None:
    if reply.release is not None:
        result = reply.release()
        if result is not None:
            await result


def _forwardable(request: web.Request) -> dict[str, str]:
    headers = request.headers
    return {name: headers[name] for name in FORWARD_REQUEST_HEADERS if name in headers}


def _json_any(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # nested past the parser's depth: not a model call
        return None


def _model_of(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    return model if isinstance(model, str) else None


def _json_object(raw: bytes) -> dict[str, Any] | None:
    value = _json_any(raw)
    return value if isinstance(value, dict) else None

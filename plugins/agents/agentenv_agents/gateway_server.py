"""The model gateway as a container: ``python -m agentenv_agents.gateway_server``.

What the ``a2a`` agent type runs as container ``model-gateway`` in an agent's sandbox. It wraps
:class:`~agentenv_agents.model_gateway.ModelGateway` with two routes only AgentEnv may use (the
*admin* token, which no agent container ever gets):

* ``POST /admin/scripts`` ``{name, script}``: load a scripted-model script; calls asking for
  model ``scripted:<name>`` are answered by it (and recorded as that model);
* ``GET /calls``: the model calls recorded so far, a page of at most 8 MiB at a time
  (``?after=<n>`` skips the first n), and ``count``, how many there are;
* ``POST /admin/callers`` ``{name, token, upstream_key?}``: accept one more token, whose calls
  are recorded with ``caller = name`` (each agent gets its own, so agents sharing the gateway
  are told apart in the records) and go upstream with ``upstream_key`` when it is given.

Calls for any other model go to the HTTP upstream when one is configured
(``AGENTENV_UPSTREAM_BASE_URL``, ``AGENTENV_UPSTREAM_API_KEY``: only this container holds the
key), else they are refused with a 400 saying no upstream is configured. Agents authenticate
with ``AGENTENV_MODEL_TOKEN``. Serves on ``AGENTENV_MODEL_PORT`` (default 4000).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import signal
from typing import Any

from aiohttp import web

from .model_gateway import ModelGateway, UpstreamReply, UpstreamRequest, json_reply
from .scripted import Script, ScriptedUpstream, ScriptError
from .wire import error_body

DEFAULT_PORT = 4000
#: How much of the call records one ``GET /calls`` answer carries (a record keeps its request).
CALLS_PAGE_BYTES = 8 * 1024 * 1024
SCRIPTED_PREFIX = "scripted:"


class DispatchUpstream:
    """``scripted:<name>`` models go to loaded scripts, every other model to ``http`` (if any)."""

    name = "agentenv-model-gateway"

    def __init__(self, http: Any | None = None) -> None:
        self.http = http
        self.scripts: dict[str, ScriptedUpstream] = {}

    async def start(self) -> None:
        if self.http is not None:
            await self.http.start()

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()

    def load(self, name: str, data: Any) -> str:
        if not isinstance(data, dict):
            raise ScriptError(f"{name}: a script is an object with 'turns'")
        script = Script.from_dict({**data, "name": name}, name=name)
        self.scripts[name] = ScriptedUpstream(script)
        return script.model

    async def send(self, request: UpstreamRequest) -> UpstreamReply:
        model = request.model or (request.body or {}).get("model")
        if isinstance(model, str) and model.startswith(SCRIPTED_PREFIX):
            script = self.scripts.get(model[len(SCRIPTED_PREFIX):])
            if script is None:
                known = ", ".join(SCRIPTED_PREFIX + n for n in sorted(self.scripts)) or "none"
                return json_reply(400, error_body(
                    request.api, 400, f"model gateway: no scripted model {model!r} is loaded "
                    f"(loaded: {known})"), error=f"scripted: no script {model!r}")
            return await script.send(request)
        if self.http is not None:
            return await self.http.send(request)
        if request.path == "/models":
            return json_reply(200, {"object": "list", "data": [
                {"id": SCRIPTED_PREFIX + n, "object": "model", "owned_by": "agentenv"}
                for n in sorted(self.scripts)]})
        return json_reply(400, error_body(
            request.api, 400, f"model gateway: model {model!r} is not scripted and no upstream "
            "is configured ([model] base_url)"), error="gateway: no upstream configured")


class ServedGateway(ModelGateway):
    """The model gateway plus the admin routes (see the module docstring)."""

    def __init__(self, upstream: DispatchUpstream, *, token: str, admin_token: str,
                 **kwargs: Any) -> None:
        super().__init__(upstream, token=token, **kwargs)
        if not admin_token or admin_token == token:
            raise ValueError("the admin token must be set and differ from the agents' token")
        self._admin = admin_token.encode()
        self.dispatch = upstream

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_route("GET", "/calls", self._calls)
        app.router.add_route("POST", "/admin/scripts", self._load_script)
        app.router.add_route("POST", "/admin/callers", self._add_caller)
        return app

    async def _add_caller(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return web.json_response({"error": "wrong or missing admin token"}, status=401)
        try:
            body = await request.json()
            key = body.get("upstream_key")
            self.add_caller(str(body["name"]), str(body["token"]),
                            str(key) if key else None)
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"bad caller: {exc}"}, status=400)
        return web.json_response({"ok": True})

    def _is_admin(self, request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        return bool(given) and hmac.compare_digest(given.encode(), self._admin)

    async def _calls(self, request: web.Request) -> web.Response:
        """A page of the records: those after the first ``after``, up to
        :data:`CALLS_PAGE_BYTES` (at least one); ``count`` says how many there are in all, so
        a reader asks again from ``after + len(calls)``. The lines go out as recorded."""
        if not self._is_admin(request):
            return web.json_response({"error": "wrong or missing admin token"}, status=401)
        raw = request.query.get("after", "0") or "0"
        if not raw.isascii() or not raw.isdigit() or len(raw) > 20:
            return web.json_response({"error": f"after must be a whole number of calls, not "
                                               f"{raw[:40]!r}"}, status=400)
        count = len(self.recorder)  # read first: a page never runs past the count it reports
        lines = self.recorder.lines(int(raw), CALLS_PAGE_BYTES)[:max(count - int(raw), 0)]
        head = _dumps({"count": count, "totals": self.recorder.totals().to_dict()})
        body = head[:-1].encode() + b', "calls": [' + b",".join(lines) + b"]}"
        return web.Response(body=body, content_type="application/json")

    async def _load_script(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return web.json_response({"error": "wrong or missing admin token"}, status=401)
        try:
            body = await request.json()
            name = body["name"]
            model = self.dispatch.load(str(name), body["script"])
        except (ValueError, KeyError, TypeError, ScriptError) as exc:
            return web.json_response({"error": f"bad script: {exc}"}, status=400)
        return web.json_response({"model": model})


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)


async def main() -> None:
    token = os.environ["AGENTENV_MODEL_TOKEN"]
    admin = os.environ["AGENTENV_MODEL_ADMIN_TOKEN"]
    port = int(os.environ.get("AGENTENV_MODEL_PORT") or DEFAULT_PORT)
    base_url = os.environ.get("AGENTENV_UPSTREAM_BASE_URL")
    http = None
    if base_url:
        from .model_gateway import HttpUpstream

        headers = json.loads(os.environ.get("AGENTENV_UPSTREAM_HEADERS") or "{}")
        http = HttpUpstream(base_url, os.environ.get("AGENTENV_UPSTREAM_API_KEY") or None,
                            headers)
    gateway = ServedGateway(DispatchUpstream(http), token=token, admin_token=admin, port=port)
    await gateway.start()
    print(f"model gateway serving on :{gateway.port} (upstream: "
          f"{'http' if http else 'scripted only'})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await gateway.stop()


if __name__ == "__main__":
    asyncio.run(main())

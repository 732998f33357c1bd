"""The todo app's backend: a REST API for the frontend and the agentenv data plane.

Standard library only, so the image builds offline in a second. Routes: ``GET /api/health``,
``GET /api/todos``, ``POST /api/todos`` (``{"text": ...}``), and ``POST /agentenv``
(JSON-RPC ``data/reset``, ``data/add``, ``data/get``): how a run seeds the list
(``load_artifact``) and how a verifier reads it back.
"""

import base64
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

LOCK = threading.Lock()
TODOS: list[dict] = []


def add(text: str, done: bool = False) -> dict:
    item = {"id": len(TODOS) + 1, "text": text, "done": done}
    TODOS.append(item)
    return item


def load_part(part: dict) -> None:
    """A ``data/add`` part: a file (``file://`` in this container, or inline bytes) or data,
    holding ``{"todos": [{"text": ...}, ...]}``."""
    if part.get("kind") == "file":
        file = part.get("file") or {}
        if "uri" in file:
            with open(urlsplit(file["uri"]).path, "rb") as handle:
                raw = handle.read()
        else:
            raw = base64.b64decode(file.get("bytes", ""))
        data = json.loads(raw)
    else:
        data = part.get("data") or {}
    for item in data.get("todos", []):
        add(str(item["text"]), bool(item.get("done", False)))


class Handler(BaseHTTPRequestHandler):
    def reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> object:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/api/health":
            self.reply(200, {"ok": True})
        elif path == "/api/todos":
            with LOCK:
                self.reply(200, {"todos": TODOS})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        try:
            body = self.body()
        except ValueError:
            self.reply(400, {"error": "not JSON"})
            return
        if path == "/api/todos":
            text = str((body or {}).get("text", "")).strip()
            if not text:
                self.reply(400, {"error": "text is empty"})
                return
            with LOCK:
                self.reply(201, add(text))
        elif path == "/agentenv":
            self.reply(200, rpc(body if isinstance(body, dict) else {}))
        else:
            self.reply(404, {"error": "not found"})

    def log_message(self, format: str, *args: object) -> None:
        print(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else ''}", flush=True)


def rpc(msg: dict) -> dict:
    method, params = msg.get("method"), msg.get("params") or {}
    out = {"jsonrpc": "2.0", "id": msg.get("id")}
    with LOCK:
        if method == "data/reset":
            TODOS.clear()
            return {**out, "result": {}}
        if method == "data/add":
            try:
                for part in params.get("parts") or []:
                    load_part(part)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                return {**out, "error": {"code": -32602, "message": f"bad part: {exc}"}}
            return {**out, "result": {}}
        if method == "data/get":
            return {**out, "result": {"parts": [{"kind": "data", "data": {"todos": TODOS}}]}}
    return {**out, "error": {"code": -32601, "message": f"no method {method}"}}


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "8000"))
    print(f"todo backend on :{port}", flush=True)
    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()

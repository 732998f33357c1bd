"""The todo app's frontend: its one page, and ``/api/...`` passed to the backend
(``BACKEND_URL``), as an nginx in front of an app would. Standard library only."""

import os
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BACKEND = os.environ.get("BACKEND_URL", "http://todo-website-backend:8000").rstrip("/")
PAGE = (Path(__file__).parent / "index.html").read_bytes()


class Handler(BaseHTTPRequestHandler):
    def send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/api/"):
            self.backend()
        elif self.path in ("/", "/index.html"):
            self.send(200, PAGE, "text/html; charset=utf-8")
        else:
            self.send(404, b"not found", "text/plain")

    def do_POST(self) -> None:
        if self.path.startswith("/api/"):
            self.backend()
        else:
            self.send(404, b"not found", "text/plain")

    def backend(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        request = urllib.request.Request(BACKEND + self.path, data=data, method=self.command,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                self.send(resp.status, resp.read(), "application/json")
        except urllib.error.HTTPError as exc:
            self.send(exc.code, exc.read(), "application/json")
        except OSError as exc:
            self.send(502, f'{{"error": "backend: {exc}"}}'.encode(), "application/json")


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "80"))
    print(f"todo frontend on :{port}, backend {BACKEND}", flush=True)
    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()

"""A local Secret Manager REST endpoint: ``GET /v1/{name}:access``, the one call the store makes.

Secrets are kept as versions (``add``); ``latest`` is the newest enabled version, as in Secret
Manager. Answers follow the REST API: ``{"name", "payload": {"data", "dataCrc32c"}}``, and on
failure Google's JSON error body (``{"error": {"code", "message", "status"}}``): 404 for a
missing secret or version, 403 when the caller may not access that secret, 401 without a bearer
token the :class:`~gcp_fakes.oauth.Authority` accepts. :meth:`SecretManagerFake.inject` makes
chosen calls fail (e.g. 503) to test retries and the last-good-bundle rule.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import google_crc32c

from gcp_fakes.http import QuietHandler, serving
from gcp_fakes.oauth import Authority

_ACCESS = re.compile(
    r"^/v1/(?P<secret>projects/[^/]+/secrets/[^/]+)/versions/(?P<version>[^/:]+):access$"
)
_STATUS = {
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class SecretManagerFake:
    """The secrets, who may not read them, pending faults, and a count of access calls."""

    def __init__(self, authority: Authority) -> None:
        self.authority = authority
        self.versions: dict[str, list[bytes]] = {}
        self.forbidden: set[str] = set()
        self.faults: list[int] = []
        self.accesses = 0
        self.corrupt_next = False
        self._lock = threading.Lock()

    def add(self, secret: str, data: bytes | str) -> int:
        """Add a version of ``projects/P/secrets/S``; returns its number."""
        with self._lock:
            versions = self.versions.setdefault(secret, [])
            versions.append(data.encode() if isinstance(data, str) else data)
            return len(versions)

    def inject(self, *statuses: int) -> None:
        """Answer the next access calls with these statuses, one each."""
        with self._lock:
            self.faults.extend(statuses)

    def access(self, secret: str, version: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.accesses += 1
            if self.faults:
                return _error(self.faults.pop(0), "injected fault")
            if secret in self.forbidden:
                return _error(
                    403,
                    f"Permission 'secretmanager.versions.access' denied for resource "
                    f"'{secret}/versions/{version}' (or it may not exist).",
                )
            versions = self.versions.get(secret)
            if not versions:
                return _error(404, f"Secret [{secret}] not found or has no versions.")
            number = len(versions) if version == "latest" else int(version)
            if not 1 <= number <= len(versions):
                return _error(404, f"Secret Version [{secret}/versions/{version}] not found.")
            data = versions[number - 1]
            crc = google_crc32c.value(data)
            if self.corrupt_next:
                self.corrupt_next, crc = False, crc ^ 1
        payload = {"data": base64.b64encode(data).decode(), "dataCrc32c": str(crc)}
        return 200, {"name": f"{secret}/versions/{number}", "payload": payload}


def _error(code: int, message: str) -> tuple[int, dict[str, Any]]:
    return code, {
        "error": {"code": code, "message": message, "status": _STATUS.get(code, "UNKNOWN")}
    }


class _Handler(QuietHandler):
    server: Any

    def do_GET(self) -> None:
        fake: SecretManagerFake = self.server.fake
        match = _ACCESS.match(self.path.split("?", 1)[0])
        if match is None:
            status, body = _error(404, f"no such method: GET {self.path}")
        elif not fake.authority.accepts(self.headers.get("Authorization")):
            status, body = _error(401, "Request had invalid authentication credentials.")
        else:
            status, body = fake.access(match.group("secret"), match.group("version"))
        self.reply(status, json.dumps(body).encode(), {"Content-Type": "application/json"})


@contextmanager
def secret_manager(authority: Authority) -> Iterator[tuple[str, SecretManagerFake]]:
    """Serve a fake; yields ``(endpoint URL, fake)``."""
    fake = SecretManagerFake(authority)
    with serving(_Handler, fake=fake) as server:
        yield server.url, fake  # type: ignore[attr-defined]

"""A proxy in front of ``gcp-storage-emulator`` that adds what the emulator leaves out.

The emulator stores and serves objects faithfully but ignores generation preconditions (an
upload with ``ifGenerationMatch=0`` over an existing object succeeds), accepts any credentials,
and answers a missing bucket or object with a bare 404. Cloud Storage's behaviour, which this
proxy restores on the requests the store sends:

* **Generation preconditions** (``ifGenerationMatch`` on multipart and resumable uploads): the
  proxy holds a per-object lock from reading the object's current generation until the upload
  that must match it has finished (for a resumable session: its final chunk), and answers 412
  ``conditionNotMet`` when the generation differs, as Cloud Storage does. Every upload of the
  object takes the same lock, so a precondition cannot be overtaken by a concurrent write.
* **Credentials**: with an :class:`~gcp_fakes.oauth.Authority`, JSON API calls need a bearer
  token it accepts (401 otherwise), and XML API calls (signed URLs) need a valid V4 signature by
  the service-account key, unexpired (403 otherwise). The signature is checked by rebuilding
  the canonical request as Cloud Storage documents it.
* **Errors**: 404s carry Cloud Storage's messages ("The specified bucket does not exist." /
  "No such object: b/o"), so the store can tell a missing bucket from a missing object.

Fault injection (:meth:`GcsProxy.inject`) answers chosen requests with an error status, either
instead of forwarding them or after forwarding them (the request took effect, the answer was
lost), to test retries. :attr:`GcsProxy.log` records ``(method, path, query)`` of each request.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import http.client
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from gcp_fakes.http import QuietHandler, serving
from gcp_fakes.oauth import Authority

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
_UPLOAD = re.compile(r"^/upload/storage/v1/b/(?P<bucket>[^/]+)/o$")
_OBJECT = re.compile(r"^/(?:storage/v1|download/storage/v1)/b/(?P<bucket>[^/]+)/o/(?P<name>.+)$")
_BUCKET = re.compile(r"^/storage/v1/b/(?P<bucket>[^/]+)(?:/o)?$")


@attrs.define
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    after: bool  # forward first: the request takes effect, the answer is lost


@attrs.define
class Session:
    bucket: str
    name: str
    generation: int | None


class GcsProxy:
    """State shared by the proxy's request handlers (see the module docstring)."""

    def __init__(self, emulator: str, authority: Authority | None) -> None:
        parsed = urllib.parse.urlsplit(emulator)
        self.emulator_host = parsed.hostname or "127.0.0.1"
        self.emulator_port = parsed.port or 80
        self.authority = authority
        self.log: list[tuple[str, str, dict[str, list[str]]]] = []
        self.faults: list[Fault] = []
        self.sessions: dict[str, Session] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def inject(self, method: str, path: str, status: int, *, times: int = 1, after: bool = False):
        """Answer the next ``times`` ``method`` requests whose path matches ``path`` with
        ``status`` (after forwarding them when ``after``)."""
        self.faults.append(Fault(method, re.compile(path), status, times, after))

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self._guard:
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and fault.path.search(path):
                    fault.times -= 1
                    return fault
        return None

    @contextmanager
    def object_lock(self, bucket: str, name: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault((bucket, name), threading.Lock())
        with lock:
            yield

    def forward(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(self.emulator_host, self.emulator_port, timeout=60)
        try:
            connection.request(method, target, body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def generation(self, bucket: str, name: str, host: str) -> int:
        """The live generation of ``bucket/name`` (0 when there is none)."""
        quoted = urllib.parse.quote(name, safe="")
        status, _, body = self.forward(
            "GET", f"/storage/v1/b/{bucket}/o/{quoted}", {"Host": host}, b""
        )
        if status != 200:
            return 0
        return int(json.loads(body)["generation"])

    def bucket_exists(self, bucket: str, host: str) -> bool:
        status, _, _ = self.forward("GET", f"/storage/v1/b/{bucket}", {"Host": host}, b"")
        return status == 200


def _error(code: int, message: str, reason: str) -> bytes:
    errors = [{"message": message, "domain": "global", "reason": reason}]
    return json.dumps({"error": {"code": code, "message": message, "errors": errors}}).encode()


def _multipart_name(body: bytes, content_type: str) -> str | None:
    """The object name in a multipart upload's JSON metadata part."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not match:
        return None
    for part in body.split(b"--" + match.group(1).encode()):
        head, _, payload = part.partition(b"\r\n\r\n")
        if b"application/json" in head.lower():
            try:
                return json.loads(payload.strip()).get("name")
            except ValueError:
                return None
    return None


def _rfc3986(value: str) -> str:
    return urllib.parse.quote(value, safe="-_.~")


class _ProxyHandler(QuietHandler):
    server: Any

    @property
    def proxy(self) -> GcsProxy:
        return self.server.proxy

    def do_GET(self) -> None:
        self.handle_any()

    def do_HEAD(self) -> None:
        self.handle_any()

    def do_POST(self) -> None:
        self.handle_any()

    def do_PUT(self) -> None:
        self.handle_any()

    def do_PATCH(self) -> None:
        self.handle_any()

    def do_DELETE(self) -> None:
        self.handle_any()

    def handle_any(self) -> None:
        split = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(split.path)
        query = urllib.parse.parse_qs(split.query)
        body = self.body()
        proxy = self.proxy
        proxy.log.append((self.command, path, query))
        json_api = split.path.startswith(("/storage/v1/", "/upload/", "/download/", "/batch/"))
        if proxy.authority is not None:
            if json_api and not proxy.authority.accepts(self.headers.get("Authorization")):
                self.send_json(
                    401, _error(401, "Anonymous caller does not have access.", "required")
                )
                return
            if not json_api and split.path != "/" and not self.signature_ok(split):
                message = "The request signature we calculated does not match the signature."
                self.send_json(403, _error(403, message, "SignatureDoesNotMatch"))
                return
        fault = proxy.take_fault(self.command, path)
        if fault is not None and not fault.after:
            self.send_json(fault.status, _error(fault.status, "injected fault", "backendError"))
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Host"] = self.headers.get("Host", "")
        status, response_headers, response_body = self.forward_checked(
            split, path, query, headers, body
        )
        if fault is not None:
            self.send_json(fault.status, _error(fault.status, "injected fault", "backendError"))
            return
        if status == 404 and json_api:
            response_body = self.not_found_body(path)
            response_headers = [("Content-Type", "application/json")]
        self.reply(
            status,
            response_body,
            {k: v for k, v in response_headers if k.lower() not in _HOP},
        )

    def send_json(self, status: int, body: bytes) -> None:
        self.reply(status, body, {"Content-Type": "application/json"})

    # -- preconditions ----------------------------------------------------------------------

    def forward_checked(
        self,
        split: urllib.parse.SplitResult,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        proxy = self.proxy
        target = split.path + (f"?{split.query}" if split.query else "")
        upload = _UPLOAD.match(split.path)
        if upload is None:
            return proxy.forward(self.command, target, headers, body)
        bucket = upload.group("bucket")
        wanted = int(query["ifGenerationMatch"][0]) if "ifGenerationMatch" in query else None
        kind = (query.get("uploadType") or [""])[0]
        if kind == "resumable" and "upload_id" in query:
            return self.resumable_chunk(query["upload_id"][0], target, headers, body)
        if kind == "resumable":  # start a session: remember what its final chunk must match
            status, response_headers, response_body = proxy.forward(
                self.command, target, headers, body
            )
            name = (query.get("name") or [None])[0] or json.loads(body or b"{}").get("name")
            for key, value in response_headers:
                if key.lower() == "location":
                    upload_id = urllib.parse.parse_qs(urllib.parse.urlsplit(value).query)
                    proxy.sessions[upload_id["upload_id"][0]] = Session(bucket, name, wanted)
            return status, response_headers, response_body
        name = (query.get("name") or [None])[0] or _multipart_name(
            body, self.headers.get("Content-Type", "")
        )
        if name is None:
            return proxy.forward(self.command, target, headers, body)
        with proxy.object_lock(bucket, name):
            if wanted is not None and proxy.generation(bucket, name, headers["Host"]) != wanted:
                return self.condition_not_met()
            return proxy.forward(self.command, target, headers, body)

    def resumable_chunk(
        self, upload_id: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        proxy = self.proxy
        session = proxy.sessions.get(upload_id)
        span = re.match(r"bytes (\d+-(\d+)|\*)/(\d+)", self.headers.get("Content-Range", ""))
        final = bool(span) and (
            span.group(2) is None or int(span.group(2)) + 1 == int(span.group(3))
        )
        if session is None or not final:
            return proxy.forward(self.command, target, headers, body)
        with proxy.object_lock(session.bucket, session.name):
            current = proxy.generation(session.bucket, session.name, headers["Host"])
            if session.generation is not None and current != session.generation:
                return self.condition_not_met()
            return proxy.forward(self.command, target, headers, body)

    @staticmethod
    def condition_not_met() -> tuple[int, list[tuple[str, str]], bytes]:
        message = "At least one of the pre-conditions you specified did not hold."
        body = _error(412, message, "conditionNotMet")
        return 412, [("Content-Type", "application/json")], body

    def not_found_body(self, path: str) -> bytes:
        match = _OBJECT.match(path) or _UPLOAD.match(path) or _BUCKET.match(path)
        bucket = match.group("bucket") if match else ""
        if not bucket or not self.proxy.bucket_exists(bucket, self.headers.get("Host", "")):
            return _error(404, "The specified bucket does not exist.", "notFound")
        name = match.groupdict().get("name") if match else None
        return _error(404, f"No such object: {bucket}/{name}", "notFound")

    # -- V4 signed URLs ---------------------------------------------------------------------

    def signature_ok(self, split: urllib.parse.SplitResult) -> bool:
        """Whether a signed-URL request carries a valid, unexpired V4 signature by our key."""
        authority = self.proxy.authority
        assert authority is not None
        pairs = urllib.parse.parse_qsl(split.query, keep_blank_values=True)
        params = dict(pairs)
        try:
            signature = bytes.fromhex(params["X-Goog-Signature"])
            signed_at = dt.datetime.strptime(params["X-Goog-Date"], "%Y%m%dT%H%M%SZ")
            expires = int(params["X-Goog-Expires"])
            credential = params["X-Goog-Credential"]
            signed_headers = params["X-Goog-SignedHeaders"].split(";")
        except (KeyError, ValueError):
            return False
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        if not credential.startswith(authority.email + "/") or now > signed_at + dt.timedelta(
            seconds=expires
        ):
            return False
        query = "&".join(
            f"{_rfc3986(k)}={_rfc3986(v)}" for k, v in sorted(pairs) if k != "X-Goog-Signature"
        )
        header_lines = "".join(
            f"{name}:{' '.join((self.headers.get(name) or '').split())}\n"
            for name in signed_headers
        )
        canonical = "\n".join(
            [
                self.command,
                split.path,
                query,
                header_lines,
                ";".join(signed_headers),
                "UNSIGNED-PAYLOAD",
            ]
        )
        scope = credential.split("/", 1)[1]
        to_sign = "\n".join(
            [
                "GOOG4-RSA-SHA256",
                params["X-Goog-Date"],
                scope,
                hashlib.sha256(canonical.encode()).hexdigest(),
            ]
        )
        try:
            authority.public_key.verify(
                signature, to_sign.encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except Exception:
            return False
        return True


@contextmanager
def gcs_proxy(emulator: str, authority: Authority | None = None) -> Iterator[tuple[str, GcsProxy]]:
    """Serve a proxy to ``emulator``; yields ``(url, proxy)``."""
    proxy = GcsProxy(emulator, authority)
    with serving(_ProxyHandler, proxy=proxy) as server:
        yield server.url, proxy  # type: ignore[attr-defined]

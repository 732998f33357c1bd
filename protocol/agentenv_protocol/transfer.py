"""Object transfer grants: moving an object by a URL someone else signed, with the contract's
checks and errors (the protocol's object-transfer part).

Why a grant and not the bytes: a trajectory, a workspace snapshot or a skill can be large, and
the side that stores it (AgentEnv, with the object store's credentials) is not the side that
makes or reads it (an env or an agent, which holds no credentials). So the storing side signs a
URL that allows one GET or one PUT until ``expires_at`` (S3 and GCS presigned URLs are such
grants) and sends it in the request; the other side moves the bytes itself.

Wire shapes (JSON objects): ``HttpGetGrant`` / ``HttpPutGrant`` ``{kind: "http_get" |
"http_put", url, expires_at, headers?}``; ``ReadObject {media_type, max_bytes, size_bytes?,
sha256?, read: HttpGetGrant}``; ``WriteObject {media_type, max_bytes, write: HttpPutGrant}``.
What a transfer checks, and the :class:`TransferError` codes it answers with:

* ``invalid_transfer`` (400): a malformed grant, a scheme other than ``https`` (``http`` is
  accepted for loopback hosts only: local object stores and emulators);
* ``grant_expired`` (410): ``expires_at`` has passed (checked before any request);
* ``transfer_too_large`` (413): more bytes than ``max_bytes`` (a write is refused before it is
  sent; a read stops reading at ``max_bytes + 1``);
* ``integrity_mismatch`` (422): the bytes read differ from ``size_bytes`` or ``sha256``;
* ``transfer_rejected`` (502): the store refused (4xx), or answered with a redirect, which is
  never followed (a grant names one URL);
* ``transfer_unavailable`` (502, retryable): the store failed (5xx) or could not be reached;
* ``transfer_timeout`` (504, retryable): no answer in time.

Used by trajectory/v1's object form (the agent SDK uploads a whole trajectory through a
``WriteObject``), skill-config/v1's bundles (each file read through a ``ReadObject``) and
snapshot/v1 (a context's trajectory and workspace, saved and loaded by grant). A
``WriteNamespaceGrant`` (many objects under one prefix, by a signed POST policy) is written with
:class:`NamespaceWriter`, for a ``data/get`` handler given ``write_namespace``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from .errors import AgentEnvError

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_TIMEOUT = 60.0
_STATUS = {"invalid_transfer": 400, "grant_expired": 410, "transfer_too_large": 413,
           "integrity_mismatch": 422, "transfer_rejected": 502, "transfer_unavailable": 502,
           "transfer_timeout": 504}


class TransferError(AgentEnvError):
    """A transfer that did not happen (or, for a read, whose bytes cannot be trusted)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(code, message, retryable=retryable, status=_STATUS[code])


def _when(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if not isinstance(value, str):
        raise TransferError("invalid_transfer", "expires_at must be an RFC 3339 time")
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise TransferError("invalid_transfer",
                            f"expires_at {value!r} is not an RFC 3339 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


@attrs.frozen
class HttpGrant:
    """One signed HTTP request: GET (``http_get``) or PUT (``http_put``) of ``url``."""

    kind: str
    url: str
    expires_at: dt.datetime = attrs.field(converter=_when)
    headers: Mapping[str, str] = attrs.field(factory=dict)

    def check(self, kind: str) -> None:
        """Refuse a grant of the wrong kind, scheme or age before anything is sent."""
        if self.kind != kind:
            raise TransferError("invalid_transfer", f"expected a {kind} grant, not {self.kind!r}")
        parts = urlsplit(self.url)
        secure = parts.scheme == "https" or (parts.scheme == "http"
                                             and (parts.hostname or "") in LOOPBACK_HOSTS)
        if not secure or not parts.hostname:
            raise TransferError("invalid_transfer", "a grant's url must be https (http only "
                                                    f"for a loopback host), not {self.url!r}")
        if self.expires_at <= dt.datetime.now(dt.UTC):
            raise TransferError("grant_expired",
                                f"the grant expired at {self.expires_at.isoformat()}")

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"kind": self.kind, "url": self.url,
                                "expires_at": self.expires_at.isoformat()}
        if self.headers:
            wire["headers"] = dict(self.headers)
        return wire


@attrs.frozen
class ReadObject:
    media_type: str
    max_bytes: int
    read: HttpGrant
    size_bytes: int | None = None
    sha256: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"media_type": self.media_type, "max_bytes": self.max_bytes,
                                "read": self.read.to_wire()}
        if self.size_bytes is not None:
            wire["size_bytes"] = self.size_bytes
        if self.sha256 is not None:
            wire["sha256"] = self.sha256
        return wire


@attrs.frozen
class WriteObject:
    media_type: str
    max_bytes: int
    write: HttpGrant

    def to_wire(self) -> dict[str, Any]:
        return {"media_type": self.media_type, "max_bytes": self.max_bytes,
                "write": self.write.to_wire()}


@attrs.frozen
class Uploaded:
    """What a write stored: its size and digest (for the other side to check on read)."""

    size_bytes: int
    sha256: str


def _grant(data: Any, field: str) -> HttpGrant:
    if not isinstance(data, Mapping):
        raise TransferError("invalid_transfer", f"{field} must be a grant object")
    headers = data.get("headers") or {}
    if not isinstance(data.get("url"), str) or not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise TransferError("invalid_transfer",
                            f"{field} needs a url and string headers")
    return HttpGrant(str(data.get("kind")), data["url"], data.get("expires_at"), dict(headers))


def _limit(data: Mapping[str, Any]) -> int:
    value = data.get("max_bytes")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TransferError("invalid_transfer", "max_bytes must be a whole number of bytes")
    return value


def read_object_from_wire(data: Any) -> ReadObject:
    """A ``ReadObject`` from its JSON; ``invalid_transfer`` for anything malformed."""
    if not isinstance(data, Mapping) or not isinstance(data.get("media_type"), str):
        raise TransferError("invalid_transfer", "a ReadObject needs media_type and read")
    size, digest = data.get("size_bytes"), data.get("sha256")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise TransferError("invalid_transfer", "size_bytes must be a whole number of bytes")
    if digest is not None and not (isinstance(digest, str) and len(digest) == 64):
        raise TransferError("invalid_transfer", "sha256 must be 64 hex digits")
    return ReadObject(data["media_type"], _limit(data), _grant(data.get("read"), "read"),
                      size, digest.lower() if digest else None)


def write_object_from_wire(data: Any) -> WriteObject:
    """A ``WriteObject`` from its JSON; ``invalid_transfer`` for anything malformed."""
    if not isinstance(data, Mapping) or not isinstance(data.get("media_type"), str):
        raise TransferError("invalid_transfer", "a WriteObject needs media_type and write")
    return WriteObject(data["media_type"], _limit(data), _grant(data.get("write"), "write"))


def _failed(status: int, url: str) -> TransferError:
    host = urlsplit(url).netloc
    if 300 <= status < 400:
        return TransferError("transfer_rejected",
                             f"{host} answered a redirect ({status}); grants are not followed")
    if status >= 500:
        return TransferError("transfer_unavailable", f"{host} answered HTTP {status}",
                             retryable=True)
    return TransferError("transfer_rejected", f"{host} refused the transfer (HTTP {status})")


@contextlib.asynccontextmanager
async def _moving(url: str, session: Any, timeout: float) -> AsyncIterator[Any]:
    """An HTTP session for one transfer (the caller's, or one closed after); the transport's
    failures become the contract's codes."""
    import aiohttp

    own = session is None
    http = session or aiohttp.ClientSession()
    try:
        yield http
    except TimeoutError:
        raise TransferError("transfer_timeout", f"no answer within {timeout:g}s",
                            retryable=True) from None
    except aiohttp.ClientError as exc:
        raise TransferError("transfer_unavailable",
                            f"{urlsplit(url).netloc}: {type(exc).__name__}",
                            retryable=True) from None
    finally:
        if own:
            await http.close()


async def read_object(obj: ReadObject, *, session: Any = None,
                      timeout: float = DEFAULT_TIMEOUT) -> bytes:
    """The object's bytes, checked against ``max_bytes``, ``size_bytes`` and ``sha256``."""
    import aiohttp

    obj.read.check("http_get")
    async with _moving(obj.read.url, session, timeout) as http, http.get(
            obj.read.url, headers=dict(obj.read.headers), allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout)) as response:
        if response.status != 200:
            raise _failed(response.status, obj.read.url)
        # read(n) answers what has arrived, up to n: loop to the end (or one byte past max)
        chunks: list[bytes] = []
        received = 0
        while received <= obj.max_bytes:
            chunk = await response.content.read(obj.max_bytes + 1 - received)
            if not chunk:
                break
            chunks.append(chunk)
            received += len(chunk)
        data = b"".join(chunks)
    if len(data) > obj.max_bytes:
        raise TransferError("transfer_too_large",
                            f"the object is larger than max_bytes ({obj.max_bytes})")
    if obj.size_bytes is not None and len(data) != obj.size_bytes:
        raise TransferError("integrity_mismatch",
                            f"read {len(data)} bytes, the grant says {obj.size_bytes}")
    if obj.sha256 is not None and hashlib.sha256(data).hexdigest() != obj.sha256:
        raise TransferError("integrity_mismatch", "the bytes read do not match the sha256")
    return data


async def write_object(obj: WriteObject, data: bytes, *, session: Any = None,
                       timeout: float = DEFAULT_TIMEOUT) -> Uploaded:
    """PUT ``data`` where the grant says; refused before sending when over ``max_bytes``."""
    obj.write.check("http_put")
    if len(data) > obj.max_bytes:
        raise TransferError("transfer_too_large",
                            f"{len(data)} bytes is more than max_bytes ({obj.max_bytes})")
    import aiohttp

    headers = {"Content-Type": obj.media_type, **obj.write.headers}
    async with _moving(obj.write.url, session, timeout) as http, http.put(
            obj.write.url, data=data, headers=headers, allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout)) as response:
        if response.status not in (200, 201, 204):
            raise _failed(response.status, obj.write.url)
    return Uploaded(len(data), hashlib.sha256(data).hexdigest())


# -- write namespaces (many objects under one prefix) ---------------------------------------


@attrs.frozen
class WriteNamespaceGrant:
    """Leave to write up to ``max_objects`` objects under ``root_path`` until ``expires_at``,
    through one signed POST policy (``write``: ``{kind: "http-post-policy", url, fields,
    path_field, file_field}``, what S3's presigned POST gives): each object is a form POST of
    ``fields`` plus its key in ``path_field`` and its bytes in ``file_field``."""

    root_path: str
    expires_at: dt.datetime = attrs.field(converter=_when)
    max_objects: int = 0
    max_object_bytes: int = 0
    max_total_bytes: int = 0
    url: str = ""
    fields: Mapping[str, str] = attrs.field(factory=dict)
    path_field: str = "key"
    file_field: str = "file"

    def to_wire(self) -> dict[str, Any]:
        """The JSON :func:`write_namespace_from_wire` reads back."""
        return {"root_path": self.root_path, "expires_at": self.expires_at.isoformat(),
                "max_objects": self.max_objects, "max_object_bytes": self.max_object_bytes,
                "max_total_bytes": self.max_total_bytes,
                "write": {"kind": "http-post-policy", "url": self.url,
                          "fields": dict(self.fields), "path_field": self.path_field,
                          "file_field": self.file_field}}


@attrs.frozen
class WrittenObject:
    """One object a namespace writer stored: its path in the namespace and its full key."""

    path: str
    key: str
    size_bytes: int
    sha256: str


def inside_path(path: Any) -> bool:
    """Whether ``path`` is a relative ``/`` path that stays where it is put: text, not empty,
    no leading ``/``, no empty, ``.`` or ``..`` part, no backslash or NUL (a namespace's objects,
    a skill bundle's files)."""
    return isinstance(path, str) and bool(path) and not path.startswith("/") \
        and "\\" not in path and "\x00" not in path \
        and not any(p in ("", ".", "..") for p in path.split("/"))


def _count(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TransferError("invalid_transfer", f"{name} must be a whole number")
    return value


def write_namespace_from_wire(data: Any) -> WriteNamespaceGrant:
    """A ``WriteNamespaceGrant`` from its JSON; ``invalid_transfer`` for anything malformed."""
    if not isinstance(data, Mapping) or not isinstance(data.get("root_path"), str) \
            or not isinstance(data.get("write"), Mapping):
        raise TransferError("invalid_transfer", "a WriteNamespaceGrant needs root_path and write")
    write = data["write"]
    fields = write.get("fields") or {}
    if write.get("kind") != "http-post-policy" or not isinstance(write.get("url"), str) \
            or not isinstance(fields, Mapping) \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        raise TransferError("invalid_transfer", "a namespace's write must be an "
                                                "http-post-policy grant with a url and fields")
    path_field, file_field = write.get("path_field"), write.get("file_field")
    if not isinstance(path_field, str) or not isinstance(file_field, str):
        raise TransferError("invalid_transfer", "an http-post-policy grant names its "
                                                "path_field and file_field")
    return WriteNamespaceGrant(
        data["root_path"].strip("/"), data.get("expires_at"), _count(data, "max_objects"),
        _count(data, "max_object_bytes"), _count(data, "max_total_bytes"), write["url"],
        dict(fields), path_field, file_field)


class NamespaceWriter:
    """Writes objects through one :class:`WriteNamespaceGrant`, keeping its limits: a path
    outside ``root_path`` or a second write of one path is ``invalid_transfer``; an object over
    ``max_object_bytes``, one more than ``max_objects`` or past ``max_total_bytes`` is
    ``transfer_too_large``, all refused before anything is sent; the store's answers map as for
    single objects."""

    def __init__(self, grant: WriteNamespaceGrant | Mapping[str, Any]) -> None:
        self.grant = grant if isinstance(grant, WriteNamespaceGrant) \
            else write_namespace_from_wire(grant)
        self.written: list[WrittenObject] = []

    @property
    def total_bytes(self) -> int:
        return sum(w.size_bytes for w in self.written)

    def _key(self, path: str) -> str:
        if not inside_path(path):
            raise TransferError("invalid_transfer",
                                f"{path!r} is not a path inside the namespace")
        if any(w.path == path for w in self.written):
            raise TransferError("invalid_transfer", f"{path!r} was already written")
        root = self.grant.root_path
        return f"{root}/{path}" if root else path

    def check(self) -> None:
        """Refuse a grant whose url is not https (or loopback http) or that has expired."""
        HttpGrant("http-post-policy", self.grant.url, self.grant.expires_at).check(
            "http-post-policy")

    async def write(self, path: str, data: bytes, *, media_type: str = "application/octet-stream",
                    session: Any = None, timeout: float = DEFAULT_TIMEOUT) -> WrittenObject:
        grant = self.grant
        key = self._key(path)
        self.check()
        if len(self.written) >= grant.max_objects:
            raise TransferError("transfer_too_large",
                                f"the namespace takes at most {grant.max_objects} objects")
        if len(data) > grant.max_object_bytes:
            raise TransferError("transfer_too_large", f"{path}: {len(data)} bytes is more than "
                                f"max_object_bytes ({grant.max_object_bytes})")
        if self.total_bytes + len(data) > grant.max_total_bytes:
            raise TransferError("transfer_too_large", f"{path}: the namespace would hold more "
                                f"than max_total_bytes ({grant.max_total_bytes})")
        import aiohttp

        form = aiohttp.FormData()
        for name, value in grant.fields.items():
            if name != grant.path_field:  # a policy's own key (a template) gives way to ours
                form.add_field(name, value)
        form.add_field(grant.path_field, key)
        form.add_field(grant.file_field, data, filename=path.rsplit("/", 1)[-1],
                       content_type=media_type)
        async with _moving(grant.url, session, timeout) as http, http.post(
                grant.url, data=form, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            if response.status not in (200, 201, 204):
                raise _failed(response.status, grant.url)
        written = WrittenObject(path, key, len(data), hashlib.sha256(data).hexdigest())
        self.written.append(written)
        return written

"""The ``gcs`` object store: Cloud Storage objects under an optional key prefix in one bucket.

Write-once is Cloud Storage's own generation precondition: a write that must not replace
anything is sent with ``if_generation_match=0`` ("only if no live object has this name"), so of
two racing writers exactly one succeeds and the other gets 412, which becomes
:class:`~agent_env.stores.base.ObjectExists`. Each write carries a random ``agentenv-write``
metadata value; when a retried write-once upload is refused, the store reads that value back to
tell "someone else won" from "our first attempt did land and only its answer was lost", so a
retry never turns our own success into a false ObjectExists.

Data is spooled (memory, then a temporary file past 8 MiB) before the upload so that the size and
sha256 are known up front: the sha256 is stored as ``sha256`` custom metadata at creation (one
request, no second metadata write), and a retry can rewind. Uploads up to 8 MiB are one multipart
request, larger ones a resumable session; either way the object appears whole or not at all.

Signed URLs are V4 and signed offline with the credentials' private key (a service-account key
file). Credentials that hold no key (user credentials, the metadata server, anonymous emulator
access) cannot sign: those raise :class:`~agent_env.stores.base.UnsupportedOperation` saying so.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import tempfile
import uuid
from typing import Any, BinaryIO

from agent_env.api import (
    InvalidObjectKey,
    ObjectExists,
    ObjectMeta,
    ObjectNotFound,
    ObjectStore,
    UnsupportedOperation,
    UserError,
    validate_key,
)
from agentenv_gcp_stores.faults import (
    Backoff,
    MissingResource,
    denied,
    is_denied,
    is_not_found,
    is_precondition_failed,
    load_credentials,
    retrying,
)

DEFAULT_CONTENT_TYPE = "application/octet-stream"
SHA256_KEY = "sha256"
WRITE_ID_KEY = "agentenv-write"
SPOOL_BYTES = 8 * 1024 * 1024
MAX_SIGNED_SECONDS = 7 * 24 * 3600  # V4 signatures last at most 7 days
MAX_KEY_BYTES = 1024  # Cloud Storage's limit on an object name


class GcsObjectStore(ObjectStore):
    """:class:`ObjectStore` on a Cloud Storage bucket (see the module docstring).

    Settings (``[stores.object]`` with ``backend = "gcs"``): ``bucket`` (required), ``prefix``
    (keys live under it, e.g. ``"agentenv/"``), ``project``, ``endpoint`` (another API root, e.g.
    an emulator's ``http://127.0.0.1:9023``), ``credentials_file`` (a service-account key; the
    default is google-auth's default chain), ``anonymous`` (no credentials: emulators only),
    ``retries`` (attempts on transient errors).
    """

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        project: str | None = None,
        endpoint: str | None = None,
        credentials_file: str | None = None,
        anonymous: bool = False,
        retries: int = 5,
        credentials: Any = None,
    ) -> None:
        if not isinstance(bucket, str) or not bucket or "/" in bucket:
            raise UserError(
                f"[stores.object] bucket must be a Cloud Storage bucket name, not {bucket!r}"
            )
        prefix = (prefix or "").strip("/")
        if prefix:
            validate_key(prefix)  # a key start that cannot escape
            prefix += "/"
        self.bucket_name = bucket
        self.prefix = prefix
        self.project = project
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.credentials_file = credentials_file
        self.anonymous = anonymous
        self.backoff = Backoff(attempts=max(1, int(retries)))
        self._credentials = credentials
        self._client: Any = None
        self._bucket: Any = None

    def __repr__(self) -> str:
        where = f"gs://{self.bucket_name}/{self.prefix}"
        return f"GcsObjectStore({where!r}, endpoint={self.endpoint!r})"

    # -- the client -------------------------------------------------------------------------

    def _bucket_handle(self) -> Any:
        if self._bucket is None:
            from google.cloud import storage

            project = None
            if self._credentials is None:
                self._credentials, project = load_credentials(
                    credentials_file=self.credentials_file, anonymous=self.anonymous
                )
            options = {"api_endpoint": self.endpoint} if self.endpoint else None
            self._client = storage.Client(
                project=self.project or project or "<none>",
                credentials=self._credentials,
                client_options=options,
            )
            self._bucket = self._client.bucket(self.bucket_name)
        return self._bucket

    def close(self) -> None:
        if self._client is not None:
            http = getattr(self._client, "_http_internal", None)
            if http is not None:
                http.close()
        self._client = self._bucket = None

    def _name(self, key: str) -> str:
        name = self.prefix + validate_key(key)
        if len(name.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidObjectKey(
                f"invalid object key {key!r}: with the store's prefix {self.prefix!r} it is "
                f"longer than Cloud Storage's {MAX_KEY_BYTES} bytes"
            )
        return name

    def _where(self, key: str = "") -> str:
        return f"gs://{self.bucket_name}/{self.prefix}{key}"

    def _fail(self, exc: Exception, *, action: str, key: str | None, permission: str) -> Exception:
        """The error to raise for a failed call (missing bucket/object, denied, or ``exc``)."""
        if is_denied(exc):
            return denied(
                exc, action=action, resource=self._where(key or ""), permission=permission
            )
        if is_not_found(exc):
            if key is None or _says_bucket(exc):
                return self._missing_bucket()
            return ObjectNotFound(key)
        return exc

    def _missing_bucket(self) -> MissingResource:
        project = f" --project {self.project}" if self.project else ""
        return MissingResource(
            f"the Cloud Storage bucket '{self.bucket_name}' does not exist: create it with "
            f"`gcloud storage buckets create gs://{self.bucket_name}{project}`"
        )

    def _call(self, what: str, call: Any, *, key: str | None, permission: str) -> Any:
        try:
            return retrying(call, what=f"Cloud Storage: {what}", backoff=self.backoff)
        except Exception as exc:
            failure = self._fail(exc, action=what, key=key, permission=permission)
            if failure is exc:
                raise
            raise failure from None

    # -- writes -----------------------------------------------------------------------------

    def put(
        self,
        key: str,
        data: bytes | bytearray | memoryview | BinaryIO,
        content_type: str | None = None,
        allow_overwrite: bool = False,
    ) -> ObjectMeta:
        name = self._name(key)
        content_type = content_type or DEFAULT_CONTENT_TYPE
        spool, size, digest = _spool(data)
        write_id = uuid.uuid4().hex
        blob = self._bucket_handle().blob(name)
        blob.metadata = {SHA256_KEY: digest, WRITE_ID_KEY: write_id}
        retried = False

        def upload() -> None:
            spool.seek(0)
            blob.upload_from_file(
                spool,
                size=size,
                content_type=content_type,
                if_generation_match=None if allow_overwrite else 0,
                retry=None,
            )

        def note_retry(_: BaseException) -> None:
            nonlocal retried
            retried = True

        try:
            retrying(upload, what=f"upload {name}", backoff=self.backoff, on_retry=note_retry)
        except Exception as exc:
            if not allow_overwrite and is_precondition_failed(exc):
                if retried and self._written_by(name, write_id):
                    return self.metadata(key)  # our earlier attempt landed; its answer was lost
                raise ObjectExists(key) from None
            failure = self._fail(exc, action="write", key=None, permission="storage.objects.create")
            if failure is exc:
                raise
            raise failure from None
        finally:
            spool.close()
        return self._meta(key, blob)

    def _written_by(self, name: str, write_id: str) -> bool:
        blob = self._bucket_handle().get_blob(name, retry=None)
        return blob is not None and (blob.metadata or {}).get(WRITE_ID_KEY) == write_id

    def delete(self, key: str) -> bool:
        blob = self._bucket_handle().blob(self._name(key))
        try:
            self._call(
                "delete",
                lambda: blob.delete(retry=None),
                key=key,
                permission="storage.objects.delete",
            )
        except ObjectNotFound:
            return False
        return True

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        blob = self._bucket_handle().blob(self._name(key))
        return self._call(
            "read",
            lambda: blob.download_as_bytes(retry=None),
            key=key,
            permission="storage.objects.get",
        )

    def open(self, key: str) -> BinaryIO:
        """A stream of the object's current generation (later overwrites never mix in)."""
        current = self._blob(key)
        pinned = self._bucket_handle().blob(current.name, generation=current.generation)
        return pinned.open("rb")

    def exists(self, key: str) -> bool:
        blob = self._bucket_handle().blob(self._name(key))
        return self._call(
            "check", lambda: blob.exists(retry=None), key=key, permission="storage.objects.get"
        )

    def metadata(self, key: str) -> ObjectMeta:
        return self._meta(key, self._blob(key))

    def _blob(self, key: str) -> Any:
        name = self._name(key)
        bucket = self._bucket_handle()
        blob = self._call(
            "read metadata of",
            lambda: bucket.get_blob(name, retry=None),
            key=key,
            permission="storage.objects.get",
        )
        if blob is None:
            raise ObjectNotFound(key)
        return blob

    def list(self, prefix: str = "") -> list[str]:
        _valid_prefix(prefix)
        bucket = self._bucket_handle()
        start = len(self.prefix)

        def names() -> list[str]:
            blobs = bucket.client.list_blobs(bucket, prefix=self.prefix + prefix, retry=None)
            return [blob.name[start:] for blob in blobs]

        return sorted(self._call("list", names, key=None, permission="storage.objects.list"))

    def _meta(self, key: str, blob: Any) -> ObjectMeta:
        metadata = blob.metadata or {}
        return ObjectMeta(
            key=key,
            size=int(blob.size or 0),
            content_type=blob.content_type or DEFAULT_CONTENT_TYPE,
            etag=blob.etag or f"{blob.generation}",
            sha256=metadata.get(SHA256_KEY),
            updated=blob.updated or dt.datetime.now(dt.UTC),
        )

    # -- URLs -------------------------------------------------------------------------------

    def signed_get_url(self, key: str, *, expires_in: int = 3600) -> str:
        blob = self._blob(key)  # a missing object is ObjectNotFound, not a dead URL
        return self._sign(blob, "GET", expires_in, None)

    def signed_put_url(
        self, key: str, *, expires_in: int = 3600, content_type: str | None = None
    ) -> str:
        blob = self._bucket_handle().blob(self._name(key))
        return self._sign(blob, "PUT", expires_in, content_type)

    def _sign(self, blob: Any, method: str, expires_in: int, content_type: str | None) -> str:
        if not isinstance(expires_in, int) or not 1 <= expires_in <= MAX_SIGNED_SECONDS:
            raise ValueError(
                f"expires_in must be 1..{MAX_SIGNED_SECONDS} seconds, not {expires_in}"
            )
        credentials = self._credentials
        if not hasattr(credentials, "sign_bytes"):
            raise UnsupportedOperation(
                "signing Cloud Storage URLs needs credentials holding a private key: set "
                "[stores.object] credentials_file to a service-account key file (the current "
                f"credentials, {type(credentials).__name__}, cannot sign)"
            )
        return blob.generate_signed_url(
            version="v4",
            expiration=dt.timedelta(seconds=expires_in),
            method=method,
            content_type=content_type,
            credentials=credentials,
            api_access_endpoint=self.endpoint or "https://storage.googleapis.com",
        )


def _says_bucket(exc: BaseException) -> bool:
    text = str(getattr(exc, "message", "") or exc).lower()
    return "bucket" in text and "object" not in text


def _spool(data: bytes | bytearray | memoryview | BinaryIO) -> tuple[BinaryIO, int, str]:
    """``(rewindable copy, size, sha256 hex)`` of ``data`` (bytes or a readable stream)."""
    digest = hashlib.sha256()
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        digest.update(raw)
        return io.BytesIO(raw), len(raw), digest.hexdigest()
    spool: BinaryIO = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # type: ignore[assignment]
    size = 0
    while chunk := data.read(1024 * 1024):
        digest.update(chunk)
        spool.write(chunk)
        size += len(chunk)
    return spool, size, digest.hexdigest()


def _valid_prefix(prefix: Any) -> str:
    """A ``list`` prefix: "" or a key start, maybe ending in "/" (the API checks whole keys)."""
    if prefix != "":
        validate_key(prefix[:-1] if isinstance(prefix, str) and prefix.endswith("/") else prefix)
    return prefix

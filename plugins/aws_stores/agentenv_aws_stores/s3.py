"""The S3 object store (``[stores] object = "s3"``), also for S3-compatible services.

Settings (``[stores.object]``): ``bucket`` (required), ``prefix`` (keys live under it),
``region``, ``endpoint_url`` (MinIO, moto, ...), ``addressing_style`` (``path`` for services
without virtual-host buckets), ``create_bucket`` (create a missing bucket instead of failing),
credentials (``profile`` or ``access_key_id`` + ``secret_access_key`` [+ ``session_token``] as
``env:``/``secret:`` references; default: the SDK's chain), ``max_attempts``, ``part_size``.

Why it is shaped this way:

* write-once is S3's own conditional write (``If-None-Match: *``), so two writers racing for a
  key are decided by S3, not by a read-then-write window; a multipart upload is completed
  with the same condition;
* every write carries a random ``write-id`` in its metadata. When a retried write is refused
  with 412, the object is read back: if it carries our id, the first attempt landed and the
  put succeeds instead of reporting a conflict with itself;
* the sha256 of the content is recorded as metadata at ``put`` time (``ObjectMeta.sha256``);
* presigned URLs are SigV4. A presigned PUT cannot enforce write-once unless the uploader sends
  ``If-None-Match: *`` itself, so it is for uploads the caller already decided to allow.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import random
import time
import uuid
from typing import Any, BinaryIO, NoReturn

from agent_env.api import (
    ConfigError,
    InvalidObjectKey,
    ObjectExists,
    ObjectMeta,
    ObjectNotFound,
    ObjectStore,
    PostPolicy,
    StoreError,
    validate_key,
)
from agentenv_aws_stores.aws import (
    AwsClient,
    AwsClientUser,
    AwsSettings,
    ResourceMissing,
    error_code,
    raise_for,
)

DEFAULT_CONTENT_TYPE = "application/octet-stream"
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's floor for every multipart part but the last
_SHA_KEY = "sha256"
_WRITE_KEY = "write-id"
_MISSING_KEY_CODES = ("NoSuchKey", "404", "NotFound")
CONFLICT_ATTEMPTS = 5


class _BodyStream(io.RawIOBase):
    """A botocore ``StreamingBody`` as a real binary file object (``read(n)``, ``with``)."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


class S3ObjectStore(AwsClientUser, ObjectStore):
    """:class:`ObjectStore` in an S3 bucket (see the module docstring for the settings)."""

    def __init__(
        self,
        *,
        bucket: str | None = None,
        prefix: str = "",
        region: str | None = None,
        endpoint_url: str | None = None,
        addressing_style: str | None = None,
        create_bucket: bool = False,
        profile: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        max_attempts: int = 6,
        part_size: int = 8 * 1024 * 1024,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ConfigError("[stores.object] the s3 store needs bucket = \"<bucket name>\"")
        if addressing_style not in (None, "auto", "path", "virtual"):
            raise ConfigError(
                f"[stores.object] addressing_style must be auto, path or virtual, "
                f"not {addressing_style!r}"
            )
        if part_size < MIN_PART_SIZE:
            raise ConfigError(f"[stores.object] part_size must be at least {MIN_PART_SIZE} bytes")
        prefix = prefix.strip("/")
        if prefix:
            validate_key(prefix)  # the prefix must be a key start that cannot escape
        self.bucket = bucket
        self.prefix = prefix + "/" if prefix else ""
        self.addressing_style = addressing_style
        self.create_bucket = create_bucket
        self.part_size = part_size
        self.aws = AwsSettings(region=region, endpoint_url=endpoint_url, profile=profile,
                               access_key_id=access_key_id, secret_access_key=secret_access_key,
                               session_token=session_token, max_attempts=max_attempts)
        s3 = {"addressing_style": addressing_style} if addressing_style else {}
        self._clients = AwsClient(self.aws, "s3", prepare=self._check_bucket,
                                  signature_version="s3v4", s3=s3)

    def __repr__(self) -> str:
        return f"S3ObjectStore(bucket={self.bucket!r}, prefix={self.prefix!r}, aws={self.aws!r})"

    # -- the client and the bucket ------------------------------------------------------------

    def _check_bucket(self, client: Any) -> None:
        from botocore.exceptions import ClientError

        try:
            client.head_bucket(Bucket=self.bucket)
            return
        except ClientError as exc:
            if error_code(exc) not in ("404", "NoSuchBucket", "NotFound"):
                raise_for(exc, "s3:ListBucket", f"s3://{self.bucket}")
        if not self.create_bucket:
            raise self._missing_bucket()
        region = client.meta.region_name
        options: dict[str, Any] = {}
        if region and region != "us-east-1":
            options["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            client.create_bucket(Bucket=self.bucket, **options)
        except ClientError as exc:
            if error_code(exc) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise_for(exc, "s3:CreateBucket", f"s3://{self.bucket}")

    def _missing_bucket(self) -> ResourceMissing:
        region = self.aws.region or "the configured region"
        return ResourceMissing(
            f"S3 bucket '{self.bucket}' does not exist ({region}): create it with "
            f"`aws s3 mb s3://{self.bucket}` or set create_bucket = true in [stores.object]"
        )

    def _fail(self, exc: BaseException, action: str, key: str | None = None) -> NoReturn:
        """Translate a botocore error about ``key`` (raises)."""
        code = error_code(exc)
        if code == "NoSuchBucket":
            self._clients.recheck()
            raise self._missing_bucket() from None
        if key is not None and code in _MISSING_KEY_CODES:
            raise ObjectNotFound(key) from None
        where = f"s3://{self.bucket}/{self.prefix}{key}" if key else f"s3://{self.bucket}"
        raise_for(exc, action, where)

    def _s3_key(self, key: str) -> str:
        return self.prefix + validate_key(key)

    # -- writes ---------------------------------------------------------------------------

    def put(
        self,
        key: str,
        data: bytes | bytearray | memoryview | BinaryIO,
        content_type: str | None = None,
        allow_overwrite: bool = False,
    ) -> ObjectMeta:
        s3_key = self._s3_key(key)
        content_type = content_type or DEFAULT_CONTENT_TYPE
        write_id = uuid.uuid4().hex
        if isinstance(data, bytes | bytearray | memoryview):
            first, rest = bytes(data), None
        else:
            first = _read_full(data, self.part_size)
            rest = data if len(first) == self.part_size else None
        if rest is None:
            digest = hashlib.sha256(first).hexdigest()
            metadata = {_SHA_KEY: digest, _WRITE_KEY: write_id}
            options: dict[str, Any] = {} if allow_overwrite else {"IfNoneMatch": "*"}
            from botocore.exceptions import ClientError

            for attempt in range(CONFLICT_ATTEMPTS):
                try:
                    answer = self.client.put_object(
                        Bucket=self.bucket, Key=s3_key, Body=first, ContentType=content_type,
                        Metadata=metadata, **options,
                    )
                    break
                except ClientError as exc:
                    if _in_flight(exc) and attempt + 1 < CONFLICT_ATTEMPTS:
                        time.sleep(random.uniform(0, 0.05 * 2**attempt))
                        continue
                    self._refused_write(exc, key, write_id)
                    return self.metadata(key)
            return ObjectMeta(
                key=key, size=len(first), content_type=content_type,
                etag=_etag(answer["ETag"]), sha256=digest, updated=dt.datetime.now(dt.UTC),
            )
        return self._put_multipart(key, s3_key, first, rest, content_type, write_id,
                                   allow_overwrite)

    def _refused_write(self, exc: BaseException, key: str, write_id: str) -> None:
        """Return if the refused write is our own earlier attempt; else raise the right error."""
        code = error_code(exc)
        if code in ("PreconditionFailed", "412") or _in_flight(exc):
            try:
                existing = self._head(key)
            except ObjectNotFound:
                existing = None
            if existing is not None and existing.get("Metadata", {}).get(_WRITE_KEY) == write_id:
                return  # a retry of a write that had already landed
            if existing is not None:
                raise ObjectExists(key) from None
            if _in_flight(exc):
                raise StoreError(
                    f"object '{key}': concurrent conditional writes kept conflicting (409); "
                    "try again"
                ) from None
            raise ObjectExists(key) from None  # deleted since it refused us: still a loss
        self._fail(exc, "s3:PutObject", key)

    def _put_multipart(
        self, key: str, s3_key: str, first: bytes, rest: BinaryIO, content_type: str,
        write_id: str, allow_overwrite: bool,
    ) -> ObjectMeta:
        from botocore.exceptions import ClientError

        client = self.client
        sha = hashlib.sha256()
        try:
            upload = client.create_multipart_upload(
                Bucket=self.bucket, Key=s3_key, ContentType=content_type,
                Metadata={_WRITE_KEY: write_id},
            )
        except ClientError as exc:
            self._fail(exc, "s3:PutObject", key)
        upload_id = upload["UploadId"]
        parts: list[dict[str, Any]] = []
        size = 0
        try:
            chunk = first
            while chunk:
                sha.update(chunk)
                size += len(chunk)
                answer = client.upload_part(
                    Bucket=self.bucket, Key=s3_key, UploadId=upload_id,
                    PartNumber=len(parts) + 1, Body=chunk,
                )
                parts.append({"ETag": answer["ETag"], "PartNumber": len(parts) + 1})
                chunk = _read_full(rest, self.part_size)
            options: dict[str, Any] = {} if allow_overwrite else {"IfNoneMatch": "*"}
            answer = client.complete_multipart_upload(
                Bucket=self.bucket, Key=s3_key, UploadId=upload_id,
                MultipartUpload={"Parts": parts}, **options,
            )
        except ClientError as exc:
            self._abort(upload_id, s3_key)
            self._refused_write(exc, key, write_id)
            return self.metadata(key)
        except BaseException:
            self._abort(upload_id, s3_key)
            raise
        # S3 sets metadata at create time, before the hash is known: record it where the
        # object is described. Multipart objects report sha256 only in this return value.
        return ObjectMeta(
            key=key, size=size, content_type=content_type, etag=_etag(answer["ETag"]),
            sha256=sha.hexdigest(), updated=dt.datetime.now(dt.UTC),
        )

    def _abort(self, upload_id: str, s3_key: str) -> None:
        import contextlib

        with contextlib.suppress(Exception):
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload_id)

    def delete(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        s3_key = self._s3_key(key)
        if not self.exists(key):
            return False
        try:
            self.client.delete_object(Bucket=self.bucket, Key=s3_key)
        except ClientError as exc:
            self._fail(exc, "s3:DeleteObject", key)
        return True

    # -- reads ----------------------------------------------------------------------------

    def _get(self, key: str) -> Any:
        from botocore.exceptions import ClientError

        s3_key = self._s3_key(key)
        try:
            return self.client.get_object(Bucket=self.bucket, Key=s3_key)
        except ClientError as exc:
            self._fail(exc, "s3:GetObject", key)

    def _head(self, key: str) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        s3_key = self._s3_key(key)
        try:
            return self.client.head_object(Bucket=self.bucket, Key=s3_key)
        except ClientError as exc:
            self._fail(exc, "s3:GetObject", key)

    def get(self, key: str) -> bytes:
        body = self._get(key)["Body"]
        try:
            return body.read()
        finally:
            body.close()

    def open(self, key: str) -> BinaryIO:
        return io.BufferedReader(_BodyStream(self._get(key)["Body"]))  # type: ignore[return-value]

    def exists(self, key: str) -> bool:
        try:
            self._head(key)
        except ObjectNotFound:
            return False
        return True

    def metadata(self, key: str) -> ObjectMeta:
        head = self._head(key)
        return ObjectMeta(
            key=key,
            size=int(head["ContentLength"]),
            content_type=head.get("ContentType") or DEFAULT_CONTENT_TYPE,
            etag=_etag(head["ETag"]),
            sha256=head.get("Metadata", {}).get(_SHA_KEY),
            updated=head["LastModified"],
        )

    def list(self, prefix: str = "") -> list[str]:
        from botocore.exceptions import ClientError

        _valid_prefix(prefix)
        keys: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix
            )
            for page in pages:
                keys.extend(item["Key"][len(self.prefix):] for item in page.get("Contents", ()))
        except ClientError as exc:
            self._fail(exc, "s3:ListBucket")
        return sorted(keys)

    # -- URLs -----------------------------------------------------------------------------

    def signed_get_url(self, key: str, *, expires_in: int = 3600) -> str:
        self._head(key)  # a missing key is ObjectNotFound, not a URL that answers 404
        return self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self._s3_key(key)},
            ExpiresIn=int(expires_in),
        )

    def signed_put_url(
        self, key: str, *, expires_in: int = 3600, content_type: str | None = None
    ) -> str:
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": self._s3_key(key)}
        if content_type:
            params["ContentType"] = content_type  # signed: the uploader must send it as is
        return self.client.generate_presigned_url(
            "put_object", Params=params, ExpiresIn=int(expires_in)
        )

    def signed_post_policy(self, prefix: str, *, max_object_bytes: int,
                           expires_in: int = 3600) -> PostPolicy:
        if not prefix.endswith("/"):
            raise InvalidObjectKey(f"an upload policy's prefix ends with '/': {prefix!r}")
        root = self._s3_key(prefix[:-1]) + "/"
        post = self.client.generate_presigned_post(
            self.bucket, root + "${filename}", ExpiresIn=int(expires_in),
            Conditions=[["starts-with", "$key", root],
                        ["content-length-range", 0, int(max_object_bytes)]])
        return PostPolicy(post["url"], root, dict(post["fields"]), int(max_object_bytes))


def _valid_prefix(prefix: Any) -> str:
    """A ``list`` prefix: "" or a key start, maybe ending in "/" (the API checks whole keys)."""
    if prefix != "":
        validate_key(prefix[:-1] if isinstance(prefix, str) and prefix.endswith("/") else prefix)
    return prefix


def _in_flight(exc: BaseException) -> bool:
    """S3's 409: another conditional write to the key is in progress (retry, then decide)."""
    return error_code(exc) == "ConditionalRequestConflict"


def _etag(value: str) -> str:
    return value.strip('"')


def _read_full(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes (fewer only at the end): ``read(n)`` may return short reads."""
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)

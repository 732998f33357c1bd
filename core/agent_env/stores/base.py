"""The four store interfaces every backend implements, their records and their errors.

A store kind is an abstract class here; the local backends live next to this module and cloud
backends (S3, DynamoDB, GCS, Firestore, ...) live in plugins. Every backend must pass the
conformance suite for its kind (:mod:`agent_env.testing.store_conformance`), so the docstrings
below are the contract: anything they leave open is backend-defined and no caller may rely on it.

Only the standard library and attrs are imported here, so a plugin can import these names
without pulling in SQLite or the filesystem backend.
"""

from __future__ import annotations

import abc
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

import attrs

from agent_env.errors import UserError

#: A document is a JSON object; values are JSON (str, int, float, bool, None, list, dict).
Document = dict[str, Any]
#: ``{"field": value}`` or ``{"field": {"$gt": 1}}``; see :class:`DocumentStore`.
Filter = Mapping[str, Any]
#: ``"field"``, ``"-field"`` (descending), or ``[("a", 1), ("b", -1)]``.
Sort = str | Sequence[str | tuple[str, int]]


# --- errors ----------------------------------------------------------------------------------


class StoreError(Exception):
    """A store operation failed for a reason that is not the caller's input."""


class DuplicateKeyError(StoreError):
    """An insert or update would give two documents the same ``_id`` or unique-index key."""

    def __init__(self, message: str, *, collection: str = "", index: str = "") -> None:
        super().__init__(message)
        self.collection = collection
        self.index = index


class InvalidQuery(StoreError, ValueError):
    """A filter, sort, update or field name the document-store language does not allow."""


class InvalidUpdate(InvalidQuery):
    """An update operator that cannot apply to the stored value ($inc on text, $push on a map)."""


class InvalidObjectKey(UserError, ValueError):
    """An object key that could escape the store or that backends disagree on (``a//b``, ``..``)."""


class ObjectNotFound(StoreError, FileNotFoundError):
    """No object under that key (also a ``FileNotFoundError``, so ``except OSError`` works)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no object '{key}' in the object store")
        self.key = key

    def __str__(self) -> str:  # OSError's own __str__ would print the errno tuple
        return str(self.args[0])


class ObjectExists(StoreError, FileExistsError):
    """The key already holds an object and the write did not ask for ``allow_overwrite``."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"object '{key}' already exists (objects are write-once; pass allow_overwrite=True "
            "to replace it)"
        )
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


class UnsupportedOperation(StoreError, NotImplementedError):
    """The backend cannot do this at all (the message says what to do instead)."""


# --- records ---------------------------------------------------------------------------------


def _utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


@attrs.frozen
class ObjectMeta:
    """What a store knows about one object.

    ``etag`` changes whenever the content changes (the filesystem store uses the sha256, S3 its
    ETag); ``sha256`` is the hex digest of the content when the backend knows it (it is recorded
    at ``put`` time; ``None`` for objects written by other tools).
    """

    key: str
    size: int
    content_type: str
    etag: str
    sha256: str | None
    updated: dt.datetime = attrs.field(converter=_utc)


@attrs.frozen
class PostPolicy:
    """A signed form upload of many objects under one key prefix (S3's presigned POST): each
    object is a POST to ``url`` of ``fields`` plus its full key (starting ``root_path``) in
    ``path_field`` and its bytes in ``file_field``. What a ``WriteNamespaceGrant`` carries."""

    url: str
    root_path: str
    fields: dict[str, str]
    max_object_bytes: int
    path_field: str = "key"
    file_field: str = "file"


@attrs.frozen
class RegistryAuth:
    """Credentials to push or pull ``registry`` images (``docker login`` arguments)."""

    registry: str
    username: str
    password: str = attrs.field(repr=False)


# --- object keys -----------------------------------------------------------------------------

MAX_KEY_BYTES = 1024
#: The largest version a store keeps (SQLite's and DynamoDB's integers are 64-bit): every
#: place that takes a version from outside checks against it, so none overflows a store.
MAX_VERSION = 2**63 - 1
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def validate_key(key: Any) -> str:
    """Return ``key`` if it is a safe, portable object key, else raise :class:`InvalidObjectKey`.

    A key is ``/``-separated segments. Refused: empty keys, absolute keys, backslashes, empty
    segments (``a//b``, a trailing ``/``), ``.`` and ``..`` segments, control characters and keys
    over 1024 UTF-8 bytes. These are the keys that would escape a folder on disk or that S3 and
    Cloud Storage treat differently, so every backend refuses the same ones.
    """
    if not isinstance(key, str):
        raise InvalidObjectKey(f"an object key must be a string, not {type(key).__name__}")
    problem = _key_problem(key)
    if problem:
        raise InvalidObjectKey(f"invalid object key {key!r}: {problem}")
    return key


def _key_problem(key: str) -> str | None:
    if not key:
        return "it is empty"
    if key.startswith("/"):
        return "it is absolute (starts with '/'); use a relative key such as 'runs/x/out.txt'"
    if "\\" in key:
        return "it contains a backslash; separate segments with '/'"
    if _CONTROL.search(key):
        return "it contains a control character"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        return f"it is longer than {MAX_KEY_BYTES} bytes"
    for segment in key.split("/"):
        if segment == "":
            return "it has an empty segment ('//' or a trailing '/')"
        if segment in (".", ".."):
            return f"it has a '{segment}' segment (keys cannot navigate folders)"
    return None


def validate_prefix(prefix: Any) -> str:
    """Check a ``list`` prefix: ``""``, or a key start that could not escape (may end in ``/``)."""
    if not isinstance(prefix, str):
        raise InvalidObjectKey(f"a key prefix must be a string, not {type(prefix).__name__}")
    if prefix == "":
        return prefix
    problem = _key_problem(prefix[:-1] if prefix.endswith("/") else prefix)
    if problem:
        raise InvalidObjectKey(f"invalid key prefix {prefix!r}: {problem}")
    return prefix


# --- the interfaces --------------------------------------------------------------------------


class DocumentStore(abc.ABC):
    """JSON documents in named collections, with a small Mongo-like query language.

    **Documents** are JSON objects. Each has a string ``_id``, given by the caller or generated at
    insert; it never changes. Returned documents are fresh copies: changing them changes nothing.

    **Collections** are named ``[A-Za-z0-9_-]+`` (at most 100 characters) and exist as soon as
    they are used; an unused collection is simply empty.

    **Field paths** are ``_id`` or dotted identifiers (``status``, ``result.score``): segments
    match ``[A-Za-z_][A-Za-z0-9_]*``.

    **Filters** are a mapping of field path to a condition; all conditions must hold. A condition
    is a scalar (equality) or a mapping of operators, all of which must hold: ``$eq``, ``$ne``,
    ``$gt``, ``$gte``, ``$lt``, ``$lte`` (operand a number or a string), ``$in`` (a list of
    scalars) and ``$exists`` (bool). Operands are scalars only (str, int, float, bool, None).
    Comparisons never cross types: ``1`` matches neither ``"1"`` nor ``true``, and ``$gt: 0``
    does not match a string. ``None`` matches a null *or missing* field; ``$ne`` matches a
    missing field; ``$exists: true`` matches a field that is present, even if null.

    **Sorts** are ``"field"``, ``"-field"`` or a list of ``(field, 1 | -1)``; where a sorted field
    is missing or holds mixed types the order is backend-defined, as is the order of ties and
    of an unsorted query.

    **Updates** are a mapping of operator to ``{field: value}``: ``$set``, ``$unset`` (value
    ignored), ``$inc`` (a number; a missing field counts as 0) and ``$push`` (appends to a list,
    creating it). ``_id`` cannot be changed. An update is atomic per document: concurrent
    ``$inc`` calls never lose an increment.

    **Indexes** (:meth:`ensure_index`) speed up filters and sorts and may be unique. A unique index
    ignores documents that lack any of its fields. With ``ttl`` (seconds), the index's single
    field holds a Unix time in seconds; a document whose time + ``ttl`` has passed is never
    returned or counted again and is deleted eventually.
    """

    @abc.abstractmethod
    def find_one(
        self, collection: str, filter: Filter | None = None, *, sort: Sort | None = None
    ) -> Document | None:
        """The first document matching ``filter`` (in ``sort`` order), or ``None``."""

    @abc.abstractmethod
    def query(
        self,
        collection: str,
        filter: Filter | None = None,
        *,
        sort: Sort | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Document]:
        """The documents matching ``filter``, sorted, skipping ``offset``, at most ``limit``."""

    @abc.abstractmethod
    def count(self, collection: str, filter: Filter | None = None) -> int:
        """How many documents match ``filter``."""

    @abc.abstractmethod
    def insert(self, collection: str, document: Mapping[str, Any]) -> str:
        """Store a new document and return its ``_id`` (generated when the document has none).

        Raises :class:`DuplicateKeyError` when the ``_id`` or a unique-index key is taken; the
        store is then unchanged. The caller's mapping is not modified.
        """

    @abc.abstractmethod
    def update(
        self,
        collection: str,
        filter: Filter,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        many: bool = False,
    ) -> int:
        """Apply update operators to the first match (or every match) and return how many.

        A change that breaks a unique index raises :class:`DuplicateKeyError` and changes
        nothing; an operator that cannot apply raises :class:`InvalidUpdate`.
        """

    @abc.abstractmethod
    def replace(self, collection: str, filter: Filter, document: Mapping[str, Any]) -> bool:
        """Replace the first match with ``document`` (keeping its ``_id``); ``False`` if none."""

    @abc.abstractmethod
    def delete(self, collection: str, filter: Filter) -> int:
        """Delete every match and return how many (``{}`` deletes the whole collection)."""

    @abc.abstractmethod
    def ensure_index(
        self,
        collection: str,
        fields: Sequence[str | tuple[str, int]],
        *,
        unique: bool = False,
        ttl: float | None = None,
    ) -> str:
        """Create the index if it does not exist yet (idempotent) and return its name.

        Existing documents that would break a new unique index raise :class:`DuplicateKeyError`.
        """

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release connections (the store may not be used afterwards)."""


class ObjectStore(abc.ABC):
    """Immutable-by-default blobs under ``/``-separated keys (see :func:`validate_key`).

    Writes are atomic: a reader sees the whole old object or the whole new one, never a part.
    Without ``allow_overwrite`` a write is *write-once*: when two writers race for a new key,
    exactly one succeeds and the other gets :class:`ObjectExists`. A missing key raises
    :class:`ObjectNotFound` (a ``FileNotFoundError``). ``a`` and ``a/b`` are independent keys.
    """

    @abc.abstractmethod
    def put(
        self,
        key: str,
        data: bytes | bytearray | memoryview | BinaryIO,
        content_type: str | None = None,
        allow_overwrite: bool = False,
    ) -> ObjectMeta:
        """Store ``data`` (bytes or a readable binary stream) under ``key``; return its metadata.

        ``content_type`` defaults to ``application/octet-stream``.
        """

    @abc.abstractmethod
    def get(self, key: str) -> bytes:
        """The whole content of ``key``."""

    @abc.abstractmethod
    def open(self, key: str) -> BinaryIO:
        """A readable binary stream of ``key`` (close it; it works as a context manager)."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        """Whether ``key`` holds an object."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """Every key starting with ``prefix`` (a plain string prefix, not a folder), sorted."""

    @abc.abstractmethod
    def metadata(self, key: str) -> ObjectMeta:
        """Size, content type, etag, sha256 and update time of ``key``."""

    @abc.abstractmethod
    def signed_get_url(self, key: str, *, expires_in: int = 3600) -> str:
        """A URL that reads ``key`` without credentials, valid ``expires_in`` seconds.

        Raises :class:`ObjectNotFound` for a missing key and :class:`UnsupportedOperation` when
        the backend cannot hand out URLs.
        """

    @abc.abstractmethod
    def signed_put_url(
        self, key: str, *, expires_in: int = 3600, content_type: str | None = None
    ) -> str:
        """A URL that uploads ``key`` with an HTTP PUT, or :class:`UnsupportedOperation`."""

    def signed_post_policy(self, prefix: str, *, max_object_bytes: int,
                           expires_in: int = 3600) -> PostPolicy:
        """A signed form upload of objects under ``prefix`` (a key prefix ending ``/``), each
        at most ``max_object_bytes``, for ``expires_in`` seconds; or
        :class:`UnsupportedOperation` (the default: only stores that sign policies offer it)."""
        raise UnsupportedOperation(
            f"the {type(self).__name__} cannot sign upload policies; configure an object "
            "store that does, such as 's3'")

    @abc.abstractmethod
    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it existed (deleting a missing key is not an error)."""

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release clients (the store may not be used afterwards)."""


class ImageStore(abc.ABC):
    """Where env images are pushed and pulled from (a local engine, a registry, ECR...).

    Implemented by plugins (docker_env for the local one); the kernel only uses this contract.
    """

    @abc.abstractmethod
    def image_ref(self, repo: str, tag: str) -> str:
        """The full reference for ``repo:tag`` in this store (``registry/prefix/repo:tag``)."""

    @abc.abstractmethod
    def ensure_repository(self, repo: str) -> None:
        """Create ``repo`` if the store needs repositories created before a push (idempotent)."""

    @abc.abstractmethod
    def owns(self, ref: str) -> bool:
        """Whether ``ref`` points into this store (so :meth:`auth` applies to it)."""

    @abc.abstractmethod
    def auth(self, ref: str) -> RegistryAuth | None:
        """Credentials to push or pull ``ref``; ``None`` when none are needed."""

    def close(self) -> None:  # noqa: B027
        """Release clients."""


class SecretStore(abc.ABC):
    """Named secret strings (API keys, tokens) that never belong in a config file."""

    @abc.abstractmethod
    def get(self, name: str) -> str | None:
        """The secret's value, or ``None`` when the store has no secret of that name."""

    def close(self) -> None:  # noqa: B027
        """Release clients."""


#: The interface each store kind implements.
STORE_INTERFACES: dict[str, type] = {
    "document": DocumentStore,
    "object": ObjectStore,
    "image": ImageStore,
    "secret": SecretStore,
}

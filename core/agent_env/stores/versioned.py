"""Versioned, immutable entities (tasks, envs, artifacts, evals) on any document store.

Each entity kind is a collection (``entity_tasks``, ...). A version is one document whose
``_id`` is ``"<id>@v<version>"``, so uniqueness of ``(id, version)`` rests on the primary key,
which every backend enforces (DynamoDB and Firestore included), and additionally on a unique
index on ``(id, version)`` that also serves "latest version" as one index seek:
``find_one({"id": id}, sort=-version)``, never a scan.

``put`` reads the latest version and inserts latest + 1; a concurrent writer that got there
first makes the insert fail with :class:`DuplicateKeyError`, and ``put`` tries again with the new
latest, so concurrent writers never lose a version and never overwrite one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import time
from collections.abc import Mapping
from typing import Any

import attrs

from agent_env.stores.base import DocumentStore, DuplicateKeyError, StoreError
from agent_env.stores.query import validate_collection

#: The entity kinds the framework versions (any ``[A-Za-z0-9_-]`` kind works).
ENTITY_KINDS = ("tasks", "envs", "artifacts", "evals")
COLLECTION_PREFIX = "entity_"
MAX_ATTEMPTS = 200


class VersionConflict(StoreError):
    """An explicit version that is not exactly latest + 1 (someone else wrote it first)."""

    def __init__(self, kind: str, id: str, wanted: int, latest: int) -> None:
        super().__init__(
            f"{kind} {id!r}: cannot write version {wanted}, the latest is {latest} "
            f"(the next version must be {latest + 1})"
        )
        self.kind, self.id, self.wanted, self.latest = kind, id, wanted, latest


def content_hash(body: Any) -> str:
    """``sha256:<hex>`` of the body's canonical JSON (key order and spacing do not matter)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


@attrs.frozen
class VersionedRecord:
    """One immutable version of an entity."""

    kind: str
    id: str
    version: int
    created_at_utc: dt.datetime = attrs.field(converter=_utc)
    content_hash: str
    body: dict[str, Any]
    reason: str | None = None

    def to_document(self) -> dict[str, Any]:
        return {
            "_id": f"{self.id}@v{self.version}",
            "kind": self.kind,
            "id": self.id,
            "version": self.version,
            "created_at_utc": self.created_at_utc.isoformat(),
            "content_hash": self.content_hash,
            "body": self.body,
            "reason": self.reason,
        }

    @classmethod
    def from_document(cls, kind: str, doc: Mapping[str, Any]) -> VersionedRecord:
        return cls(
            kind=kind,
            id=doc["id"],
            version=int(doc["version"]),
            created_at_utc=dt.datetime.fromisoformat(doc["created_at_utc"]),
            content_hash=doc["content_hash"],
            body=doc["body"],
            reason=doc.get("reason"),
        )


class VersionedStore:
    """Versioned entities on a :class:`DocumentStore` (see the module docstring)."""

    def __init__(self, documents: DocumentStore) -> None:
        self.documents = documents
        self._ready: set[str] = set()

    def _collection(self, kind: str) -> str:
        collection = validate_collection(COLLECTION_PREFIX + kind)
        if collection not in self._ready:
            self.documents.ensure_index(collection, ["id", "version"], unique=True)
            self.documents.ensure_index(collection, ["version", "id"])  # list_ids: version == 1
            self._ready.add(collection)
        return collection

    @staticmethod
    def _check_id(id: Any) -> str:
        if not isinstance(id, str) or not id:
            raise ValueError(f"an entity id must be a non-empty string, not {id!r}")
        return id

    def latest_version(self, kind: str, id: str) -> int:
        """The latest version of ``id`` (0 when there is none)."""
        doc = self.documents.find_one(
            self._collection(kind), {"id": self._check_id(id)}, sort=[("version", -1)]
        )
        return int(doc["version"]) if doc else 0

    def put(
        self,
        kind: str,
        id: str,
        body: Mapping[str, Any],
        *,
        version: int | None = None,
        reason: str | None = None,
        content_hash: str | None = None,
    ) -> VersionedRecord:
        """Write the next version of ``id`` (latest + 1, from 1) and return it.

        With ``version``, it must be exactly latest + 1, else :class:`VersionConflict`.
        ``content_hash`` defaults to the hash of ``body``; the ledger passes its own (of files).
        """
        record, _ = self._put(kind, id, body, version, reason, content_hash, if_changed=False)
        return record

    def put_if_changed(
        self,
        kind: str,
        id: str,
        body: Mapping[str, Any],
        *,
        reason: str | None = None,
        content_hash: str | None = None,
    ) -> tuple[VersionedRecord, bool]:
        """``(record, created)``: the latest version when its content hash is the same, else put.

        Two processes writing the same content at once end with one new version, not two.
        """
        return self._put(kind, id, body, None, reason, content_hash, if_changed=True)

    def _put(
        self,
        kind: str,
        id: str,
        body: Mapping[str, Any],
        version: int | None,
        reason: str | None,
        digest: str | None,
        *,
        if_changed: bool,
    ) -> tuple[VersionedRecord, bool]:
        collection = self._collection(kind)
        self._check_id(id)
        if not isinstance(body, Mapping):
            raise ValueError(f"an entity body must be a mapping, not {type(body).__name__}")
        # a JSON round trip: the stored body is a plain dict, detached from the caller's mapping
        plain: dict[str, Any] = json.loads(json.dumps(body, allow_nan=False))
        digest = digest or content_hash(plain)
        for attempt in range(MAX_ATTEMPTS):
            latest_doc = self.documents.find_one(collection, {"id": id}, sort=[("version", -1)])
            latest = int(latest_doc["version"]) if latest_doc else 0
            if if_changed and latest_doc and latest_doc["content_hash"] == digest:
                return VersionedRecord.from_document(kind, latest_doc), False
            if version is not None and version != latest + 1:
                raise VersionConflict(kind, id, version, latest)
            record = VersionedRecord(
                kind=kind,
                id=id,
                version=latest + 1,
                created_at_utc=dt.datetime.now(dt.UTC),
                content_hash=digest,
                body=plain,
                reason=reason,
            )
            try:
                self.documents.insert(collection, record.to_document())
            except DuplicateKeyError:
                if version is not None:
                    raise VersionConflict(kind, id, version, latest + 1) from None
                time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))  # spread racers out
                continue
            return record, True
        raise StoreError(f"{kind} {id!r}: gave up after {MAX_ATTEMPTS} concurrent version races")

    def get(self, kind: str, id: str, version: int | None = None) -> VersionedRecord | None:
        """Version ``version`` of ``id``, the latest when ``None``; ``None`` when absent."""
        collection = self._collection(kind)
        self._check_id(id)
        if version is None:
            doc = self.documents.find_one(collection, {"id": id}, sort=[("version", -1)])
        else:
            doc = self.documents.find_one(collection, {"id": id, "version": int(version)})
        return VersionedRecord.from_document(kind, doc) if doc else None

    def list_versions(self, kind: str, id: str) -> list[VersionedRecord]:
        """Every version of ``id``, oldest first."""
        docs = self.documents.query(
            self._collection(kind), {"id": self._check_id(id)}, sort=[("version", 1)]
        )
        return [VersionedRecord.from_document(kind, d) for d in docs]

    def list_ids(self, kind: str) -> list[str]:
        """Every id of ``kind``, sorted (each has a version 1: versions are never deleted)."""
        docs = self.documents.query(self._collection(kind), {"version": 1})
        return sorted(d["id"] for d in docs)

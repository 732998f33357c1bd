"""A collection of records in the document store, one document per record keyed by its id.

Why one class: the deployments ledger, durable env states and env snapshots are each "records
of one attrs type, added once, read by id, listed oldest first, dropped" over the config's
document store; each names its collection, its record type and the record's id.
"""

from __future__ import annotations

import builtins
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from agent_env.stores.base import DocumentStore


class Record(Protocol):
    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Record)


class Records(Generic[R]):
    """Records of one type in ``collection`` (see the module)."""

    collection: ClassVar[str]

    def __init__(self, documents: DocumentStore) -> None:
        self.documents = documents

    @staticmethod
    def key(record: Any) -> str:
        """The record's id (its document's ``_id``)."""
        raise NotImplementedError

    @staticmethod
    def load(document: dict[str, Any]) -> Any:
        """The record a document holds."""
        raise NotImplementedError

    def add(self, record: R) -> None:
        """Record a new one (its id must be new: DuplicateKeyError else)."""
        self.documents.insert(self.collection, {**record.to_json(), "_id": self.key(record)})

    def get(self, record_id: str) -> R | None:
        document = self.documents.find_one(self.collection, {"_id": record_id})
        return self.load(document) if document else None

    def all(self, query: dict[str, Any] | None = None) -> builtins.list[R]:
        """Every record (matching ``query``), oldest first."""
        found = [self.load(d) for d in self.documents.query(self.collection, query)]
        return sorted(found, key=lambda r: (getattr(r, "created_at", None), self.key(r)))

    def remove(self, record_id: str) -> bool:
        """Drop a record; False when there was none."""
        return self.documents.delete(self.collection, {"_id": record_id}) > 0

"""Instance records: what one run of a task did, kept in the document store.

A record is written when the run starts (``running``) and again when it ends (``completed``,
``failed`` or ``cancelled``), so a crashed run is still visible. Its id is
``<task_id>-<8 chars>``; its context has secrets stripped (see :mod:`agent_env.tasks.context`).
"""

from __future__ import annotations

import secrets
import string
from datetime import UTC, datetime
from typing import Any, Protocol

import attrs

RUNNING, COMPLETED, FAILED, CANCELLED = "running", "completed", "failed", "cancelled"
COLLECTION = "task_instances"
_ALPHABET = string.ascii_lowercase + string.digits


def new_instance_id(task_id: str) -> str:
    return f"{task_id}-{''.join(secrets.choice(_ALPHABET) for _ in range(8))}"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@attrs.frozen
class FailureRecord:
    """One step failure, in the reference's shape."""

    step_id: str
    step_type: str
    error: str
    error_type: str
    started_at_utc: str
    duration_seconds: float
    is_fatal: bool
    #: beyond the reference's shape: the failure was infrastructure's (see ``InfraError``)
    is_infra: bool = False

    @property
    def summary(self) -> str:
        return f"{self.error_type}: {self.error}" if self.error else self.error_type


@attrs.define
class InstanceRecord:
    """One run of one task."""

    instance_id: str
    task_id: str
    task_version: int | None
    status: str
    started_at_utc: str
    finished_at_utc: str | None = None
    outcome: str | None = None
    scores: dict[str, float] = attrs.field(factory=dict)
    completed_steps: list[str] = attrs.field(factory=list)
    failures: list[FailureRecord] = attrs.field(factory=list)
    retried_failures: list[FailureRecord] = attrs.field(factory=list)
    context: dict[str, Any] = attrs.field(factory=dict)
    cancel_reason: str | None = None
    duration_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InstanceRecord:
        import cattrs

        return cattrs.structure(data, cls)


class InstanceStore(Protocol):
    def save(self, record: InstanceRecord) -> None: ...

    def get(self, instance_id: str) -> InstanceRecord | None: ...


class MemoryInstances:
    """Records kept in memory (tests)."""

    def __init__(self) -> None:
        self.records: dict[str, InstanceRecord] = {}

    def save(self, record: InstanceRecord) -> None:
        self.records[record.instance_id] = InstanceRecord.from_json(record.to_json())

    def get(self, instance_id: str) -> InstanceRecord | None:
        return self.records.get(instance_id)


class StoredInstances:
    """Records in a document store (collection ``task_instances``, ``_id`` = instance id)."""

    def __init__(self, documents: Any) -> None:
        self.documents = documents

    def save(self, record: InstanceRecord) -> None:
        import json

        document = json.loads(json.dumps(record.to_json(), default=str))
        document["_id"] = record.instance_id
        if not self.documents.replace(COLLECTION, {"_id": record.instance_id}, document):
            self.documents.insert(COLLECTION, document)

    def get(self, instance_id: str) -> InstanceRecord | None:
        document = self.documents.find_one(COLLECTION, {"_id": instance_id})
        if document is None:
            return None
        document.pop("_id", None)
        return InstanceRecord.from_json(document)

"""Instance records: what one run of a task did, kept in the document store.

A record is written when the run starts (``running``) and again when it ends (``completed``,
``failed`` or ``cancelled``), so a crashed run is still visible. A run whose process died
before it ended (``kill -9``) stays ``running`` until ``agent-env gc`` finds its process gone and
marks it ``abandoned`` with the reason (:func:`dead_runs`): the record names its
process in ``owner`` (the ``agentenv.owner`` label's form). Its id is ``<task_id>-<8 chars>``;
its context has secrets stripped (see :mod:`agent_env.tasks.context`).

What a store cannot hold never reaches one: :func:`storage_problem` names a value JSON has no
form for (NaN, infinity, an integer too long to print) or a context past
:data:`MAX_CONTEXT_BYTES`, and the engine fails the step that produced it.
"""

from __future__ import annotations

import secrets
import string
from datetime import UTC, datetime
from typing import Any, Protocol

import attrs

RUNNING, COMPLETED, FAILED, CANCELLED = "running", "completed", "failed", "cancelled"
ABANDONED = "abandoned"
COLLECTION = "task_instances"
#: The most a record's context may take as JSON: every document store holds it (DynamoDB's
#: item limit is 400 KB), so a run records the same wherever its records go.
MAX_CONTEXT_BYTES = 256 * 1024
#: Longer integers have no JSON text in Python (``sys.get_int_max_str_digits``) nor a number
#: type in most stores; 4000 leaves the interpreter's 4300 some room.
MAX_INT_DIGITS = 4000
_ALPHABET = string.ascii_lowercase + string.digits


def new_instance_id(task_id: str) -> str:
    return f"{task_id}-{''.join(secrets.choice(_ALPHABET) for _ in range(8))}"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unstorable_scalar(value: Any) -> str | None:
    """Why a JSON scalar cannot be stored (``nan``, ``inf``, a 5,000-digit integer), or None."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} (JSON has no NaN or infinity)"
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT_DIGITS * 3.33:  # ~log2(10) bits per digit
            return f"an integer of more than {MAX_INT_DIGITS} digits"
    return None


def storage_problem(value: Any, where: str = "context") -> str | None:
    """The first thing in ``value`` (JSON-like) that no store can hold, or None; then its size
    against :data:`MAX_CONTEXT_BYTES`."""
    import json

    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            stack.extend((f"{path}.{k}", v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        else:
            why = unstorable_scalar(item)
            if why is not None:
                return f"{path} is {why}"
    try:
        size = len(json.dumps(value, default=str).encode())
    except (TypeError, ValueError) as exc:
        return f"{where} is not JSON: {exc}"
    if size > MAX_CONTEXT_BYTES:
        return (f"{where} comes to {size // 1024} KB of JSON; a run record holds at most "
                f"{MAX_CONTEXT_BYTES // 1024} KB (write large results to a file or an artifact)")
    return None


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
    #: beyond the reference's shape: ``error`` says it all (one of AgentEnv's own errors,
    #: worded for the user), so lines show it without ``error_type``
    plain: bool = False

    @property
    def summary(self) -> str:
        return failure_line(self.error_type, self.error, plain=self.plain)


def failure_line(error_type: str, error: str, *, plain: bool) -> str:
    """A step failure as one line shows it: the message of one of our errors (``plain``) as it
    is; an unexpected exception's with its kind, which a bug report needs."""
    if plain and error:
        return error
    return f"{error_type}: {error}" if error else error_type


@attrs.define
class SandboxRecord:
    """A sandbox a run made: the provider that served it, and each provider of its fallback
    chain passed over before that (``"<name>: <why>"``)."""

    name: str
    provider: str
    sandbox_id: str
    passed_over: list[str] = attrs.field(factory=list)


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
    #: The process running it, as ``agentenv.owner`` (see :mod:`agent_env.sandbox.ownership`).
    owner: str | None = None
    #: Why ``agent-env gc`` marked it ``abandoned`` (its process died before it ended).
    abandon_reason: str | None = None
    #: ``step_id``, ``started_at_utc``, ``duration_seconds`` and ``outcome`` (completed/failed)
    #: of each step that ran, in the task's order (the explorer's timeline).
    step_timings: list[dict[str, Any]] = attrs.field(factory=list)
    #: The sandboxes it made, in order, with the provider that served each.
    sandboxes: list[SandboxRecord] = attrs.field(factory=list)

    @property
    def agents(self) -> str | None:
        """The ids of the agents it deployed (sorted, comma-joined): what runs are filtered by."""
        return _joined(self.context.get("agents"), "agent")

    @property
    def models(self) -> str | None:
        """The models its agents used (sorted, comma-joined): what runs are filtered by."""
        return _joined(self.context.get("agents"), "model")

    def _metadata(self, key: str) -> str | None:
        metadata = self.context.get("metadata")
        value = metadata.get(key) if isinstance(metadata, dict) else None
        return str(value) if value else None

    @property
    def run_group_id(self) -> str | None:
        """The run group (``eval run``, ``task run --k``, ``run-batch``) it ran in, if any."""
        return self._metadata("run_group_id")

    @property
    def eval_id(self) -> str | None:
        """The eval it ran for, if any."""
        return self._metadata("eval_id")

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InstanceRecord:
        import cattrs

        return cattrs.structure(data, cls)


def _joined(agents: Any, key: str) -> str | None:
    if not isinstance(agents, dict):
        return None
    found = sorted({str(a[key]) for a in agents.values() if isinstance(a, dict) and a.get(key)})
    return ",".join(found) or None


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
        # top level, so a store query filters on them (the explorer's agent and model filters)
        document["agents"], document["models"] = record.agents, record.models
        document["run_group_id"], document["eval_id"] = record.run_group_id, record.eval_id
        if not self.documents.replace(COLLECTION, {"_id": record.instance_id}, document):
            self.documents.insert(COLLECTION, document)

    def get(self, instance_id: str) -> InstanceRecord | None:
        document = self.documents.find_one(COLLECTION, {"_id": instance_id})
        if document is None:
            return None
        document.pop("_id", None)
        return InstanceRecord.from_json(document)

    def running(self, instance_id: str | None = None) -> list[InstanceRecord]:
        """Records still ``running`` (only ``instance_id``'s when given)."""
        query: dict[str, Any] = {"status": RUNNING}
        if instance_id is not None:
            query["_id"] = instance_id
        found = []
        for document in self.documents.query(COLLECTION, query):
            document.pop("_id", None)
            found.append(InstanceRecord.from_json(document))
        return found

    def abandon(self, record: InstanceRecord, reason: str) -> bool:
        """Mark a ``running`` record ``abandoned``; False when it is no longer running (its run
        ended meanwhile)."""
        changed = self.documents.update(
            COLLECTION, {"_id": record.instance_id, "status": RUNNING},
            {"$set": {"status": ABANDONED, "abandon_reason": reason,
                      "finished_at_utc": utc_now()}})
        return bool(changed)


@attrs.frozen
class DeadRun:
    """A ``running`` record whose process is gone: gc marks it ``abandoned``."""

    record: InstanceRecord
    reason: str


def dead_runs(instances: StoredInstances, instance_id: str | None = None) -> list[DeadRun]:
    """``running`` records whose process (``owner``) is gone from this host; a record of
    another host, or one with no owner, cannot be judged here and is left as it is."""
    from agent_env.sandbox.ownership import owner_state

    found = []
    for record in instances.running(instance_id):
        state = owner_state(record.owner)
        if state.alive is False:
            found.append(DeadRun(record, f"{state.why} (killed before the run ended)"))
    return found

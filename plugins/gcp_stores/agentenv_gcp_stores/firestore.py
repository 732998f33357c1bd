"""The ``firestore`` document store: collections as Firestore collections, queried natively.

**Layout.** A collection ``c`` is the Firestore collection ``<prefix>c``; a document is stored
with its fields as native Firestore values (so Firestore can filter and order them), its ``_id``
both as a field and, percent-encoded, as the Firestore document id (ids may hold ``/``, which
Firestore ids may not). Two things JSON allows and Firestore does not are encoded reversibly:
a list directly inside a list is stored as the map ``{"~[]": [...]}``, and a map key that is
empty, starts with ``~`` or looks like ``__x__`` (reserved) gets a ``~`` in front. The hidden
top-level field ``~w`` holds the id of the write that last changed the document (see faults).

**Queries.** A filter is split into what Firestore evaluates exactly as the reference language
does (equality and ``$in`` on non-null scalars; ranges, which Firestore also keeps within the
operand's type, on one field) and the rest (``None`` meaning null-or-missing, ``$ne``,
``$exists``), which is applied in Python with :func:`agent_env.stores.query.matches`; every
returned document is checked against the whole filter. Sorting, ``limit`` and ``offset`` run in
Firestore when the filter was pushed down whole: documents that have every sort field come back
in Firestore's order (which is the reference's for JSON types), and those lacking one (which a
Firestore ``order_by`` leaves out) follow them. Otherwise the matching documents are fetched and
sorted in Python. A query Firestore refuses for want of a composite index is retried without
the parts that need it, and the index's creation link is logged once.

**Unique indexes** are lock documents in ``<prefix>c~unique``, one per (index, key), naming the
document that holds the key. Every write runs in a Firestore transaction that reads the index
definitions (``<prefix>~indexes/c``), the documents and the locks it touches, so a key can never
be taken twice; a lock whose holder is gone, expired or no longer has that key is stale and is
taken over. **TTL** indexes hide expired documents from every read and delete them when a query
meets them.

**Faults.** Contention (``ABORTED``) re-runs the transaction with backoff; a commit whose answer
was lost (a transient error) is checked by reading back ``~w`` before trying again, so an
increment is never applied twice and an insert that landed is not reported as a duplicate.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from agent_env.api import DocumentStore, DuplicateKeyError, InvalidQuery, StoreError, UserError
from agent_env.api import query as q
from agentenv_gcp_stores.faults import (
    Backoff,
    GaveUp,
    MissingResource,
    denied,
    is_denied,
    is_not_found,
    is_transient,
    load_credentials,
    message_of,
    retrying,
)

WRITE_FIELD = "~w"
NESTED_LIST = "~[]"
INDEX_COLLECTION = "~indexes"
LOCK_SUFFIX = "~unique"
MAX_IN = 30  # Firestore's limit on an `in` list
CHUNK = 50  # documents per write transaction (each may touch a few lock documents)
INT64 = 2**63
SCOPES = (
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/datastore",
)

#: The document-store interface's shapes (``agent_env.api`` exports the interface, not these).
Document = dict[str, Any]
Filter = Mapping[str, Any]
Sort = str | Sequence[str | tuple[str, int]]


@attrs.frozen
class IndexSpec:
    """One ``ensure_index`` call's result, as kept in the collection's index document."""

    name: str
    fields: tuple[tuple[str, int], ...]
    unique: bool
    ttl: float | None

    def to_value(self) -> dict[str, Any]:
        return {"fields": [list(f) for f in self.fields], "unique": self.unique, "ttl": self.ttl}

    @classmethod
    def from_value(cls, name: str, value: Mapping[str, Any]) -> IndexSpec:
        fields = tuple((str(p), int(d)) for p, d in value["fields"])
        return cls(name, fields, bool(value["unique"]), value.get("ttl"))

    def key_of(self, doc: Mapping[str, Any]) -> str | None:
        """The unique key of ``doc`` (canonical JSON of its values), ``None`` if a field lacks."""
        values = []
        for path, _ in self.fields:
            value = q.get_path(doc, path)
            if value is q.MISSING:
                return None
            values.append(value)
        return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def expired(self, doc: Mapping[str, Any], now: float) -> bool:
        if self.ttl is None:
            return False
        value = q.get_path(doc, self.fields[0][0])
        return _is_number(value) and value + self.ttl <= now


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def index_name(collection: str, spec: Sequence[tuple[str, int]], unique: bool, ttl: float | None):
    """The same names the SQLite store gives, so logs and tests read alike across backends."""
    body = "__".join(p.replace(".", "_") + ("_desc" if d < 0 else "") for p, d in spec)
    digest = hashlib.sha1(json.dumps([list(map(list, spec)), unique, ttl]).encode()).hexdigest()
    return f"{'ux' if unique else 'ix'}_{collection}__{body}_{digest[:6]}"


# -- encoding -----------------------------------------------------------------------------------


def document_id(doc_id: str) -> str:
    """A Firestore document id for ``_id``: percent-encoded, never ``.``/``..``/``__x__``."""
    encoded = urllib.parse.quote(doc_id, safe="")
    if encoded in (".", "..") or (encoded.startswith("__") and encoded.endswith("__")):
        encoded = (
            urllib.parse.quote(encoded[0], safe="").replace(".", "%2E").replace("_", "%5F")
            + encoded[1:]
        )
    if len(encoded.encode()) > 1400:  # Firestore ids stop at 1500 bytes
        encoded = "~sha256-" + hashlib.sha256(doc_id.encode()).hexdigest()
    return encoded


def _escape_key(key: str) -> str:
    if key == "" or key.startswith("~") or (key.startswith("__") and key.endswith("__")):
        return "~" + key
    return key


def _unescape_key(key: str) -> str:
    return key[1:] if key.startswith("~") else key


def encode(value: Any, in_list: bool = False) -> Any:
    """JSON -> what Firestore can store (see the module docstring); refuses 65-bit integers."""
    if isinstance(value, Mapping):
        return {_escape_key(k): encode(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [encode(v, True) for v in value]
        return {NESTED_LIST: items} if in_list else items
    if isinstance(value, int) and not isinstance(value, bool) and not -INT64 <= value < INT64:
        raise InvalidQuery(f"Firestore stores integers of 64 bits at most, not {value}")
    return value


def decode(value: Any) -> Any:
    if isinstance(value, Mapping):
        if len(value) == 1 and NESTED_LIST in value:
            return [decode(v) for v in value[NESTED_LIST]]
        return {_unescape_key(k): decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def field_path(path: str) -> str:
    """A query path in Firestore's field-path syntax (escaped segments are back-quoted)."""
    from google.cloud.firestore_v1.field_path import FieldPath

    return FieldPath(*(_escape_key(part) for part in path.split("."))).to_api_repr()


def _from_stored(data: Mapping[str, Any]) -> Document:
    return {_unescape_key(k): decode(v) for k, v in data.items() if k != WRITE_FIELD}


# -- queries ------------------------------------------------------------------------------------


@attrs.frozen
class Plan:
    """How a filter splits between Firestore and Python."""

    pushed: tuple[tuple[str, str, Any], ...]  # (path, firestore op, operand)
    exact: bool  # Firestore alone evaluates the whole filter
    empty: bool = False  # a `$in: []` that nothing matches


_RANGE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def plan_filter(conditions: list[tuple[str, str, Any]], sort: list[tuple[str, int]]) -> Plan:
    pushed: list[tuple[str, str, Any]] = []
    exact = True
    range_field = sort[0][0] if sort else None
    used_in = False
    for path, op, operand in conditions:
        if op == "$eq" and operand is not None:
            pushed.append((path, "==", operand))
        elif op == "$in" and not operand:
            return Plan((), True, empty=True)
        elif op == "$in" and not used_in and len(operand) <= MAX_IN and None not in operand:
            pushed.append((path, "in", list(operand)))
            used_in = True
        elif op in _RANGE and (range_field is None or range_field == path):
            range_field = path
            pushed.append((path, _RANGE[op], operand))
        else:
            exact = False
    return Plan(tuple(pushed), exact)


class FirestoreDocumentStore(DocumentStore):
    """:class:`DocumentStore` on Cloud Firestore in Native mode (see the module docstring).

    Settings (``[stores.document]`` with ``backend = "firestore"``): ``project``, ``database``
    (default ``(default)``), ``prefix`` (put before every collection name, e.g. ``"agentenv_"``),
    ``endpoint`` (another API host), ``credentials_file``, ``anonymous``, ``retries``. Set
    ``FIRESTORE_EMULATOR_HOST`` to use an emulator (the client library then connects without TLS
    or credentials).
    """

    def __init__(
        self,
        *,
        project: str | None = None,
        database: str = "(default)",
        prefix: str = "",
        endpoint: str | None = None,
        credentials_file: str | None = None,
        anonymous: bool = False,
        retries: int = 5,
        transaction_attempts: int = 60,
        credentials: Any = None,
    ) -> None:
        if prefix and not all(c.isalnum() or c in "_-" for c in prefix):
            raise UserError("[stores.document] prefix may hold letters, digits, '_' and '-'")
        self.project = project
        self.database = database
        self.prefix = prefix
        self.endpoint = endpoint
        self.credentials_file = credentials_file
        self.anonymous = anonymous
        self.backoff = Backoff(attempts=max(1, int(retries)))
        self.transaction_attempts = max(1, int(transaction_attempts))
        self._credentials = credentials
        self._client: Any = None
        self._seen_indexes: set[str] = set()
        self._index_links_logged: set[str] = set()

    def __repr__(self) -> str:
        return (
            f"FirestoreDocumentStore(project={self.project!r}, database={self.database!r}, "
            f"prefix={self.prefix!r})"
        )

    # -- the client -------------------------------------------------------------------------

    def _db(self) -> Any:
        if self._client is None:
            import os

            from google.cloud import firestore

            credentials, project = self._credentials, None
            if credentials is None and not os.environ.get("FIRESTORE_EMULATOR_HOST"):
                credentials, project = load_credentials(
                    credentials_file=self.credentials_file, anonymous=self.anonymous, scopes=SCOPES
                )
            self.project = self.project or project
            options = {"api_endpoint": self.endpoint} if self.endpoint else None
            self._client = firestore.Client(
                project=self.project,
                credentials=credentials,
                database=self.database,
                client_options=options,
            )
            self.project = self._client.project
        return self._client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _where(self) -> str:
        return f"projects/{self.project}/databases/{self.database}"

    def _fail(self, exc: Exception, action: str, collection: str) -> Exception:
        if is_denied(exc):
            return denied(
                exc,
                action=action,
                resource=f"Firestore collection {self.prefix}{collection} in {self._where()}",
                permission="datastore.entities.get/list/create/update/delete",
            )
        if is_not_found(exc) and "database" in message_of(exc).lower():
            return MissingResource(
                f"the Firestore database {self._where()} does not exist: create it with "
                f"`gcloud firestore databases create --database='{self.database}' "
                f"--location=<region> --project {self.project}`"
            )
        return exc

    def _guard(self, action: str, collection: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            failure = self._fail(exc, action, collection)
            if failure is exc:
                raise
            raise failure from None

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        return retrying(call, what=f"Firestore: {what}", backoff=self.backoff)

    # -- references -------------------------------------------------------------------------

    def _collection(self, collection: str) -> Any:
        return self._db().collection(self.prefix + q.validate_collection(collection))

    def _ref(self, collection: str, doc_id: str) -> Any:
        return self._collection(collection).document(document_id(doc_id))

    def _index_ref(self, collection: str) -> Any:
        return self._db().collection(self.prefix + INDEX_COLLECTION).document(collection)

    def _lock_ref(self, collection: str, spec: IndexSpec, key: str) -> Any:
        digest = hashlib.sha256(f"{spec.name}\n{key}".encode()).hexdigest()
        return self._db().collection(self.prefix + collection + LOCK_SUFFIX).document(digest)

    def _specs(self, collection: str, snapshot: Any = None) -> list[IndexSpec]:
        if snapshot is None:
            snapshot = self._retrying(
                "read index definitions",
                lambda: self._index_ref(collection).get(retry=None),
            )
        data = snapshot.to_dict() if snapshot.exists else None
        indexes = (data or {}).get("indexes") or {}
        return [IndexSpec.from_value(name, value) for name, value in sorted(indexes.items())]

    # -- reads ------------------------------------------------------------------------------

    def find_one(
        self, collection: str, filter: Filter | None = None, *, sort: Sort | None = None
    ) -> Document | None:
        found = self.query(collection, filter, sort=sort, limit=1)
        return found[0] if found else None

    def query(
        self,
        collection: str,
        filter: Filter | None = None,
        *,
        sort: Sort | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Document]:
        q.validate_collection(collection)
        q.check_page(limit, offset)
        conditions = q.normalize_filter(filter)
        order = q.normalize_sort(sort)
        if limit == 0:
            return []
        rows = self._guard(
            "read", collection, lambda: self._select(collection, conditions, order, limit, offset)
        )
        return [doc for doc, _ in rows]

    def count(self, collection: str, filter: Filter | None = None) -> int:
        return len(self.query(collection, filter))

    def _select(
        self,
        collection: str,
        conditions: list[tuple[str, str, Any]],
        order: list[tuple[str, int]],
        limit: int | None,
        offset: int,
    ) -> list[tuple[Document, Any]]:
        """``(document, snapshot)`` pairs matching, in order, paged (see the module docstring)."""
        specs = self._specs(collection)
        ttl = [s for s in specs if s.ttl is not None]
        wanted = {(p, op): v for p, op, v in conditions}
        if ("_id", "$eq") in wanted and isinstance(wanted[("_id", "$eq")], str):
            rows = self._get_by_id(collection, wanted[("_id", "$eq")])
            return self._finish(
                collection,
                rows,
                conditions=conditions,
                order=order,
                limit=limit,
                offset=offset,
                ttl=ttl,
            )
        plan = plan_filter(conditions, order)
        if plan.empty:
            return []
        exact = plan.exact and not ttl
        finish = functools.partial(
            self._finish,
            collection,
            conditions=conditions,
            order=order,
            limit=limit,
            offset=offset,
            ttl=ttl,
        )
        if exact and order and limit is not None:
            head, whole = self._stream(collection, plan.pushed, order, offset + limit)
            if not whole:
                return finish(head)
            if len(head) >= offset + limit:
                return head[offset:]
            have = {doc["_id"] for doc, _ in head}
            rest, whole = self._stream(collection, plan.pushed, [], None)
            if not whole:
                return finish(rest)
            missing = [
                row
                for row in rest
                if row[0]["_id"] not in have
                and any(q.get_path(row[0], p) is q.MISSING for p, _ in order)
            ]
            return (head + _sorted(missing, order))[offset : offset + limit]
        if exact and not order:
            window = None if limit is None else offset + limit
            rows, whole = self._stream(collection, plan.pushed, [], window)
            return rows[offset:] if whole else finish(rows)
        rows, _ = self._stream(collection, plan.pushed, [], None)
        return finish(rows)

    def _finish(
        self,
        collection: str,
        rows: list[tuple[Document, Any]],
        *,
        conditions: list[tuple[str, str, Any]],
        order: list[tuple[str, int]],
        limit: int | None,
        offset: int,
        ttl: list[IndexSpec],
    ) -> list[tuple[Document, Any]]:
        now = time.time()
        expired = [row for row in rows if any(s.expired(row[0], now) for s in ttl)]
        if expired:
            self._purge(collection, [doc["_id"] for doc, _ in expired])
        live = [
            row
            for row in rows
            if not any(s.expired(row[0], now) for s in ttl)
            and q.matches(row[0], _as_filter(conditions))
        ]
        live = _sorted(live, order)
        return live[offset : None if limit is None else offset + limit]

    def _get_by_id(self, collection: str, doc_id: str) -> list[tuple[Document, Any]]:
        ref = self._ref(collection, doc_id)
        snapshot = self._retrying("read", lambda: ref.get(retry=None))
        if not snapshot.exists:
            return []
        return [(_from_stored(snapshot.to_dict()), snapshot)]

    def _stream(
        self,
        collection: str,
        pushed: list[tuple[str, str, Any]],
        order: list[tuple[str, int]],
        limit: int | None,
    ) -> tuple[list[tuple[Document, Any]], bool]:
        """``(rows, whole)``: a Firestore query's rows, ``whole`` False when Firestore refused
        it for want of a composite index and a simpler query ran instead (then every row of the
        equality filters comes back, unsorted and unpaged, for the caller to finish in Python)."""
        from google.api_core import exceptions as api

        try:
            rows = self._retrying("query", lambda: self._run(collection, pushed, order, limit))
            return rows, True
        except api.FailedPrecondition as exc:
            if "index" not in message_of(exc).lower():
                raise
            self._log_index_link(exc)
        equality = [c for c in pushed if c[1] in ("==", "in")]
        return self._retrying("query", lambda: self._run(collection, equality, [], None)), False

    def _run(
        self,
        collection: str,
        conditions: list[tuple[str, str, Any]],
        order: list[tuple[str, int]],
        limit: int | None,
    ) -> list[tuple[Document, Any]]:
        from google.cloud.firestore_v1.base_query import FieldFilter

        query: Any = self._collection(collection)
        for path, op, operand in conditions:
            query = query.where(filter=FieldFilter(field_path(path), op, operand))
        for path, direction in order:
            query = query.order_by(
                field_path(path), direction="DESCENDING" if direction < 0 else "ASCENDING"
            )
        if limit is not None:
            query = query.limit(limit)
        rows = []
        for snapshot in query.stream(retry=None):
            rows.append((_from_stored(snapshot.to_dict()), snapshot))
        return rows

    def _log_index_link(self, exc: Exception) -> None:
        text = message_of(exc)
        if text not in self._index_links_logged:
            self._index_links_logged.add(text)
            from agent_env.api import get_logger

            get_logger("gcp_stores.firestore").warning(
                "Firestore needs a composite index for this query; sorting and filtering in "
                "Python meanwhile",
                detail=text,
            )

    # -- writes -----------------------------------------------------------------------------

    def insert(self, collection: str, document: Mapping[str, Any]) -> str:
        doc = q.prepare_document(document, new_id=uuid.uuid4().hex)
        encode(doc)  # refuse what Firestore cannot store before any round trip

        def body(txn: Any, write_id: str) -> Outcome:
            ref = self._ref(collection, doc["_id"])
            index_snap, current = _get_all(txn, [self._index_ref(collection), ref])
            specs = self._specs(collection, index_snap)
            if current.exists:
                stored = _from_stored(current.to_dict())
                if not any(s.expired(stored, time.time()) for s in specs):
                    raise DuplicateKeyError(
                        f"{collection}: a document with _id {doc['_id']!r} already exists",
                        collection=collection,
                        index="_id",
                    )
            locks = self._claim_locks(txn, collection, specs, [(None, doc)])
            txn.set(ref, self._stored(doc, write_id))
            for lock_ref, value in locks:
                txn.set(lock_ref, value)
            return Outcome(doc["_id"], ref)

        return self._transact("insert into", collection, body)

    def update(
        self,
        collection: str,
        filter: Filter,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        many: bool = False,
    ) -> int:
        q.normalize_update(changes)
        conditions = q.normalize_filter(filter)

        def change(doc: Document) -> Document:
            return q.apply_update(doc, changes)

        return self._rewrite(collection, conditions, change, many, "update")

    def replace(self, collection: str, filter: Filter, document: Mapping[str, Any]) -> bool:
        conditions = q.normalize_filter(filter)
        fresh = q.prepare_document(document, new_id="-")
        encode(fresh)

        def change(doc: Document) -> Document:
            return {**{k: v for k, v in fresh.items() if k != "_id"}, "_id": doc["_id"]}

        return self._rewrite(collection, conditions, change, False, "replace") > 0

    def _rewrite(
        self,
        collection: str,
        conditions: list[tuple[str, str, Any]],
        change: Callable[[Document], Document],
        many: bool,
        action: str,
    ) -> int:
        """Apply ``change`` to the first (or every) match, each batch in one transaction."""
        q.validate_collection(collection)
        total = 0
        for _ in range(self.transaction_attempts):
            rows = self._guard(
                "read",
                collection,
                lambda: self._select(collection, conditions, [], None if many else 1, 0),
            )
            if not rows:
                return total
            ids = [doc["_id"] for doc, _ in rows]
            done = 0
            for chunk in _chunks(ids, CHUNK):
                done += self._transact(
                    action,
                    collection,
                    lambda txn, write_id, chunk=chunk: self._rewrite_chunk(
                        txn, write_id, collection, chunk, conditions, change, many
                    ),
                )
            total += done
            if many or done:
                return total
        raise StoreError(f"{collection}: the matching document kept changing; {action} gave up")

    def _rewrite_chunk(
        self,
        txn: Any,
        write_id: str,
        collection: str,
        ids: list[str],
        conditions: list[tuple[str, str, Any]],
        change: Callable[[Document], Document],
        many: bool,
    ) -> Outcome:
        refs = [self._ref(collection, i) for i in ids]
        index_snap, *snapshots = _get_all(txn, [self._index_ref(collection), *refs])
        specs = self._specs(collection, index_snap)
        now = time.time()
        pairs: list[tuple[Document, Document]] = []
        changed_refs = []
        for ref, snapshot in zip(refs, snapshots, strict=True):
            if not snapshot.exists:
                continue
            old = _from_stored(snapshot.to_dict())
            if any(s.expired(old, now) for s in specs) or not q.matches(
                old, _as_filter(conditions)
            ):
                continue
            new = change(old)
            encode(new)
            pairs.append((old, new))
            changed_refs.append(ref)
            if not many:
                break
        locks = self._claim_locks(txn, collection, specs, pairs)
        released = self._released_locks(collection, specs, pairs)
        for ref, (_, new) in zip(changed_refs, pairs, strict=True):
            txn.set(ref, self._stored(new, write_id))
        claimed = {lock_ref.path for lock_ref, _ in locks}
        for lock_ref in released:
            if lock_ref.path not in claimed:
                txn.delete(lock_ref)
        for lock_ref, value in locks:
            txn.set(lock_ref, value)
        return Outcome(len(pairs), changed_refs[0] if changed_refs else None)

    def delete(self, collection: str, filter: Filter) -> int:
        conditions = q.normalize_filter(filter)
        q.validate_collection(collection)
        rows = self._guard(
            "read", collection, lambda: self._select(collection, conditions, [], None, 0)
        )
        total = 0
        for chunk in _chunks([doc["_id"] for doc, _ in rows], CHUNK):
            total += self._transact(
                "delete from",
                collection,
                lambda txn, write_id, chunk=chunk: self._delete_chunk(
                    txn, collection, chunk, conditions
                ),
            )
        return total

    def _delete_chunk(
        self,
        txn: Any,
        collection: str,
        ids: list[str],
        conditions: list[tuple[str, str, Any]] | None,
    ) -> Outcome:
        """Delete the documents still matching (``conditions`` None: those expired)."""
        refs = [self._ref(collection, i) for i in ids]
        index_snap, *snapshots = _get_all(txn, [self._index_ref(collection), *refs])
        specs = self._specs(collection, index_snap)
        now = time.time()
        gone: list[tuple[Document, Document]] = []
        for ref, snapshot in zip(refs, snapshots, strict=True):
            if not snapshot.exists:
                continue
            old = _from_stored(snapshot.to_dict())
            expired = any(s.expired(old, now) for s in specs)
            if conditions is None and not expired:
                continue
            if conditions is not None and (expired or not q.matches(old, _as_filter(conditions))):
                continue
            gone.append((old, {}))
            txn.delete(ref)
        for lock_ref in self._released_locks(collection, specs, gone):
            txn.delete(lock_ref)
        return Outcome(len(gone), None, deleted=[self._ref(collection, d["_id"]) for d, _ in gone])

    def _purge(self, collection: str, ids: list[str]) -> None:
        """Delete expired documents met by a read (best effort: a failure only delays it)."""
        try:
            for chunk in _chunks(ids, CHUNK):
                self._transact(
                    "purge expired documents from",
                    collection,
                    lambda txn, write_id, chunk=chunk: self._delete_chunk(
                        txn, collection, chunk, None
                    ),
                )
        except Exception as exc:  # a read must not fail because cleaning up did
            from agent_env.api import get_logger

            get_logger("gcp_stores.firestore").info(
                "could not delete expired documents yet", collection=collection, error=str(exc)
            )

    # -- unique locks -----------------------------------------------------------------------

    def _claim_locks(
        self,
        txn: Any,
        collection: str,
        specs: list[IndexSpec],
        pairs: list[tuple[Document | None, Document]],
    ) -> list[tuple[Any, dict[str, Any]]]:
        """The lock documents to write for ``(old, new)`` pairs; DuplicateKeyError on a clash."""
        wanted: dict[str, tuple[Any, IndexSpec, str, str]] = {}
        for old, new in pairs:
            for spec in specs:
                if not spec.unique:
                    continue
                key = spec.key_of(new)
                if key is None or (old is not None and spec.key_of(old) == key):
                    continue
                ref = self._lock_ref(collection, spec, key)
                if ref.path in wanted:
                    raise self._duplicate(collection, spec)
                wanted[ref.path] = (ref, spec, key, new["_id"])
        if not wanted:
            return []
        snapshots = _get_all(txn, [ref for ref, _, _, _ in wanted.values()])
        holders = []
        for (_, spec, key, owner), snapshot in zip(wanted.values(), snapshots, strict=True):
            holder = snapshot.to_dict()["doc"] if snapshot.exists else None
            if holder is not None and holder != owner:
                holders.append((spec, key, holder))
        if holders:
            now = time.time()
            new_of = {old["_id"]: new for old, new in pairs if old is not None}
            holder_snaps = _get_all(txn, [self._ref(collection, h) for _, _, h in holders])
            for (spec, key, _), snapshot in zip(holders, holder_snaps, strict=True):
                if not snapshot.exists:
                    continue  # a stale lock: its holder is gone
                held = _from_stored(snapshot.to_dict())
                changing = held["_id"] in new_of and spec.key_of(new_of[held["_id"]]) != key
                live = not any(s.expired(held, now) for s in specs)
                if live and not changing and spec.key_of(held) == key:
                    raise self._duplicate(collection, spec)
        return [
            (ref, {"doc": owner, "index": spec.name}) for ref, spec, _, owner in wanted.values()
        ]

    def _released_locks(
        self, collection: str, specs: list[IndexSpec], pairs: list[tuple[Document, Document]]
    ) -> list[Any]:
        """Locks the old versions held that the new versions (``{}``: deleted) no longer do."""
        refs = []
        for old, new in pairs:
            for spec in specs:
                if not spec.unique:
                    continue
                key = spec.key_of(old)
                if key is not None and spec.key_of(new) != key:
                    refs.append(self._lock_ref(collection, spec, key))
        return refs

    @staticmethod
    def _duplicate(collection: str, spec: IndexSpec) -> DuplicateKeyError:
        fields = [p for p, _ in spec.fields]
        return DuplicateKeyError(
            f"{collection}: a document with the same {fields} already exists "
            f"(unique index {spec.name})",
            collection=collection,
            index=spec.name,
        )

    # -- indexes ----------------------------------------------------------------------------

    def ensure_index(
        self,
        collection: str,
        fields: Sequence[str | tuple[str, int]],
        *,
        unique: bool = False,
        ttl: float | None = None,
    ) -> str:
        q.validate_collection(collection)
        spec_fields = q.index_fields(fields, unique=unique, ttl=ttl)
        name = index_name(collection, spec_fields, unique, None if ttl is None else float(ttl))
        if name in self._seen_indexes:
            return name
        spec = IndexSpec(name, tuple(spec_fields), unique, None if ttl is None else float(ttl))

        def add(txn: Any, write_id: str) -> Outcome:
            (snapshot,) = _get_all(txn, [self._index_ref(collection)])
            indexes = dict(
                ((snapshot.to_dict() or {}).get("indexes") or {}) if snapshot.exists else {}
            )
            if name in indexes:
                return Outcome(False, None)
            indexes[name] = spec.to_value()
            txn.set(self._index_ref(collection), {"indexes": indexes})
            return Outcome(True, None)

        added = self._transact("create an index on", collection, add)
        if added and unique:
            try:
                self._backfill(collection, spec)
            except DuplicateKeyError:
                self._drop_index(collection, spec)
                raise
        self._seen_indexes.add(name)
        return name

    def _backfill(self, collection: str, spec: IndexSpec) -> None:
        """Take a lock for every existing document (after the definition, so none is missed)."""
        rows = self._guard("read", collection, lambda: self._select(collection, [], [], None, 0))
        seen: set[str] = set()
        for doc, _ in rows:
            key = spec.key_of(doc)
            if key is None:
                continue
            if key in seen:
                raise self._duplicate(collection, spec)
            seen.add(key)
        for chunk in _chunks([doc for doc, _ in rows if spec.key_of(doc) is not None], CHUNK):
            self._transact(
                "create an index on",
                collection,
                lambda txn, write_id, chunk=chunk: Outcome(
                    len(chunk), None, locks=self._claim_backfill(txn, collection, spec, chunk)
                ),
            )

    def _claim_backfill(
        self, txn: Any, collection: str, spec: IndexSpec, docs: list[Document]
    ) -> int:
        locks = self._claim_locks(txn, collection, [spec], [(None, d) for d in docs])
        for lock_ref, value in locks:
            txn.set(lock_ref, value)
        return len(locks)

    def _drop_index(self, collection: str, spec: IndexSpec) -> None:
        def drop(txn: Any, write_id: str) -> Outcome:
            (snapshot,) = _get_all(txn, [self._index_ref(collection)])
            indexes = (
                dict((snapshot.to_dict() or {}).get("indexes") or {}) if snapshot.exists else {}
            )
            indexes.pop(spec.name, None)
            txn.set(self._index_ref(collection), {"indexes": indexes})
            return Outcome(None, None)

        self._transact("drop an index on", collection, drop)
        locks = self._db().collection(self.prefix + collection + LOCK_SUFFIX)
        from google.cloud.firestore_v1.base_query import FieldFilter

        for snapshot in locks.where(filter=FieldFilter("index", "==", spec.name)).stream():
            snapshot.reference.delete()

    # -- transactions -----------------------------------------------------------------------

    def _stored(self, doc: Document, write_id: str) -> dict[str, Any]:
        stored = encode(doc)
        stored[WRITE_FIELD] = write_id
        return stored

    def _transact(self, action: str, collection: str, body: Callable[[Any, str], Outcome]) -> Any:
        """Run ``body(transaction, write_id)`` in a transaction until it commits (see faults)."""
        from google.api_core import exceptions as api
        from google.cloud import firestore

        write_id = uuid.uuid4().hex
        transient_failures = 0
        for attempt in range(self.transaction_attempts):
            outcome: list[Outcome] = []

            def run(txn: Any, outcome: list[Outcome] = outcome) -> None:
                outcome.append(body(txn, write_id))

            try:
                firestore.transactional(run)(self._db().transaction(max_attempts=1))
                return outcome[-1].result
            except (DuplicateKeyError, InvalidQuery):
                raise
            except Exception as exc:
                cause = _api_error(exc)
                committed_maybe = (
                    bool(outcome)
                    and not isinstance(cause, api.Aborted)
                    and (is_transient(cause) or isinstance(cause, api.InvalidArgument))
                )
                if committed_maybe and self._landed(write_id, outcome[-1]):
                    return outcome[-1].result
                if isinstance(cause, api.Aborted):
                    time.sleep(random.uniform(0, min(0.5, 0.005 * 2 ** min(attempt, 8))))
                    continue
                if is_transient(cause) or committed_maybe:
                    transient_failures += 1
                    if transient_failures >= self.backoff.attempts:
                        raise GaveUp(
                            f"Firestore: {action} {collection}: gave up after "
                            f"{transient_failures} attempts: {type(cause).__name__}: "
                            f"{message_of(cause)}"
                        ) from cause
                    time.sleep(self.backoff.delay(transient_failures))
                    continue
                failure = self._fail(cause, action, collection)
                if failure is not cause:
                    raise failure from None
                raise
        raise StoreError(
            f"Firestore: {action} {collection}: still contended after "
            f"{self.transaction_attempts} attempts"
        )

    def _landed(self, write_id: str, outcome: Outcome | None) -> bool:
        """Whether a commit whose answer was lost took effect (its write id is in place)."""
        if outcome is None:
            return False
        try:
            if outcome.probe is not None:
                snapshot = outcome.probe.get(retry=None)
                return snapshot.exists and (snapshot.to_dict() or {}).get(WRITE_FIELD) == write_id
            if outcome.deleted:
                return not any(ref.get(retry=None).exists for ref in outcome.deleted)
        except Exception:
            return False
        return False


@attrs.define
class Outcome:
    """What a transaction body returns: its result and how to tell later whether it landed."""

    result: Any
    probe: Any  # a document the commit writes with the write id, or None
    deleted: list[Any] = attrs.field(factory=list)
    locks: int = 0


def _api_error(exc: BaseException) -> BaseException:
    """The service's error behind the library's wrappers: its transaction helper raises
    ``ValueError`` for exhausted retries (cause) or a failed rollback of a transaction that
    never began (context)."""
    while isinstance(exc, ValueError) and not isinstance(exc, InvalidQuery):
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return exc


def _get_all(txn: Any, refs: list[Any]) -> list[Any]:
    """Snapshots of ``refs`` read in ``txn``, in the order of ``refs``."""
    by_path = {snapshot.reference.path: snapshot for snapshot in txn.get_all(refs)}
    return [by_path[ref.path] for ref in refs]


def _as_filter(conditions: list[tuple[str, str, Any]]) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for path, op, operand in conditions:
        out.setdefault(path, {})[op] = operand
    return out


def _sorted(rows: list[tuple[Document, Any]], order: list[tuple[str, int]]) -> list[Any]:
    """``rows`` in the reference order of ``order`` (missing and null first, ascending)."""
    if not order:
        return rows
    by_identity = {id(doc): (doc, snapshot) for doc, snapshot in rows}
    return [by_identity[id(doc)] for doc in q.sort_documents([d for d, _ in rows], order)]


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]

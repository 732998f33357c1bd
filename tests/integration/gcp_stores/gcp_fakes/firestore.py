"""A local Firestore: the gRPC service ``google.firestore.v1.Firestore``, the calls the store makes.

Built from the protobuf types google-cloud-firestore ships, so the real client library talks to
it through ``FIRESTORE_EMULATOR_HOST`` exactly as it talks to the official emulator. Implemented:

* ``BatchGetDocuments`` (plain and inside a transaction), ``RunQuery`` (one collection; field,
  composite-AND and unary filters; ``order_by``; ``offset``; ``limit``; ``select``), and
  ``BeginTransaction`` / ``Commit`` / ``Rollback``. Anything else answers ``UNIMPLEMENTED``, and
  so do query features the store never sends (cursors, OR filters, collection groups), so a
  change in what the store sends shows up as a failure rather than a silent mismatch.
* Firestore's semantics where the store depends on them: the cross-type value order (null <
  bool < number < timestamp < string < bytes < reference < geo point < array < map), numbers
  compared across integer and double, range filters matching only their operand's type, a field
  filter or ``order_by`` never matching a document that lacks the field, ``__name__`` as the
  final tie-break, and commit preconditions (``exists`` -> ``ALREADY_EXISTS`` / ``NOT_FOUND``,
  ``update_time`` -> ``FAILED_PRECONDITION``), all writes of a commit applied or none.
* Transactions are serializable by optimistic validation: a commit fails with ``ABORTED`` when a
  document the transaction read changed since it was read, and the client retries, as it does
  when the real service aborts a contended transaction (the real one locks pessimistically; the
  client sees the same outcomes). Queries inside a transaction are not used by the store and are
  refused here.

Run ``python -m gcp_fakes.firestore PORT`` for a server in its own process (fork-safe for the
conformance suite's multi-process tests); it reads one JSON command a line on stdin (faults,
a missing or forbidden database, strict composite-index checks) and answers ``ok`` on stdout.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from google.cloud.firestore_v1.field_path import FieldPath
from google.cloud.firestore_v1.types import document as document_types
from google.cloud.firestore_v1.types import firestore as firestore_types
from google.cloud.firestore_v1.types import query as query_types
from google.cloud.firestore_v1.types import write as write_types
from google.protobuf import empty_pb2, timestamp_pb2

SERVICE = "google.firestore.v1.Firestore"
Value = document_types.Value.pb()
Document = document_types.Document.pb()
StructuredQuery = query_types.StructuredQuery.pb()
FieldOp = StructuredQuery.FieldFilter.Operator
UnaryOp = StructuredQuery.UnaryFilter.Operator


class Abort(Exception):
    """Ends an RPC with a gRPC status (raised inside handlers)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- values -------------------------------------------------------------------------------------


def order_key(value: Any) -> tuple[Any, ...]:
    """A Python key that sorts and compares values as Firestore does."""
    kind = value.WhichOneof("value_type")
    if kind == "null_value" or kind is None:
        return (0,)
    if kind == "boolean_value":
        return (1, value.boolean_value)
    if kind in ("integer_value", "double_value"):
        number = getattr(value, kind)
        return (2, 0, 0) if isinstance(number, float) and math.isnan(number) else (2, 1, number)
    if kind == "timestamp_value":
        return (3, value.timestamp_value.seconds, value.timestamp_value.nanos)
    if kind == "string_value":
        return (4, value.string_value.encode("utf-8"))
    if kind == "bytes_value":
        return (5, value.bytes_value)
    if kind == "reference_value":
        return (6, tuple(value.reference_value.split("/")))
    if kind == "geo_point_value":
        return (7, value.geo_point_value.latitude, value.geo_point_value.longitude)
    if kind == "array_value":
        return (8, tuple(order_key(v) for v in value.array_value.values))
    if kind == "map_value":
        fields = value.map_value.fields
        return (9, tuple((k, order_key(fields[k])) for k in sorted(fields)))
    raise Abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported value type {kind}")


def type_class(key: tuple[Any, ...]) -> int:
    return key[0]


def field_value(doc: Any, path: str) -> Any | None:
    """The value at ``path`` in ``doc`` (``__name__`` is the reference), or ``None`` if absent."""
    parts = FieldPath.from_api_repr(path).parts
    if parts == ("__name__",):
        return Value(reference_value=doc.name)
    fields = doc.fields
    value = None
    for i, part in enumerate(parts):
        if part not in fields:
            return None
        value = fields[part]
        if i < len(parts) - 1:
            if value.WhichOneof("value_type") != "map_value":
                return None
            fields = value.map_value.fields
    return value


# -- queries ------------------------------------------------------------------------------------


def filter_matches(doc: Any, where: Any) -> bool:
    kind = where.WhichOneof("filter_type")
    if kind is None:
        return True
    if kind == "composite_filter":
        composite = where.composite_filter
        if composite.op != StructuredQuery.CompositeFilter.Operator.AND:
            raise Abort(grpc.StatusCode.UNIMPLEMENTED, "this fake implements AND filters only")
        return all(filter_matches(doc, f) for f in composite.filters)
    if kind == "unary_filter":
        unary = where.unary_filter
        value = field_value(doc, unary.field.field_path)
        if value is None:
            return False
        key = order_key(value)
        is_nan = key == (2, 0, 0)
        return {
            UnaryOp.IS_NULL: key == (0,),
            UnaryOp.IS_NOT_NULL: key != (0,),
            UnaryOp.IS_NAN: is_nan,
            UnaryOp.IS_NOT_NAN: not is_nan and type_class(key) == 2,
        }[unary.op]
    field = where.field_filter
    value = field_value(doc, field.field.field_path)
    if value is None:
        return False
    key, operand = order_key(value), field.value
    op = field.op
    if op in (FieldOp.IN, FieldOp.NOT_IN):
        candidates = [order_key(v) for v in operand.array_value.values]
        return (key in candidates) if op == FieldOp.IN else (key not in candidates and key != (0,))
    if op in (FieldOp.ARRAY_CONTAINS, FieldOp.ARRAY_CONTAINS_ANY):
        raise Abort(grpc.StatusCode.UNIMPLEMENTED, "array-contains is not used by the store")
    wanted = order_key(operand)
    if op == FieldOp.EQUAL:
        return key == wanted
    if op == FieldOp.NOT_EQUAL:
        return key != wanted and key != (0,)
    if type_class(key) != type_class(wanted):  # range filters stay within the operand's type
        return False
    return {
        FieldOp.LESS_THAN: key < wanted,
        FieldOp.LESS_THAN_OR_EQUAL: key <= wanted,
        FieldOp.GREATER_THAN: key > wanted,
        FieldOp.GREATER_THAN_OR_EQUAL: key >= wanted,
    }[op]


def _filters(where: Any) -> list[Any]:
    kind = where.WhichOneof("filter_type")
    if kind is None:
        return []
    if kind == "composite_filter":
        return [f for child in where.composite_filter.filters for f in _filters(child)]
    return [where]


def query_fields(where: Any) -> tuple[set[str], set[str]]:
    """``(equality fields, inequality fields)`` of a filter."""
    equal, unequal = set(), set()
    for f in _filters(where):
        if f.WhichOneof("filter_type") == "unary_filter":
            equal.add(f.unary_filter.field.field_path)
        elif f.field_filter.op in (FieldOp.EQUAL, FieldOp.IN):
            equal.add(f.field_filter.field.field_path)
        else:
            unequal.add(f.field_filter.field.field_path)
    return equal, unequal


# -- the service --------------------------------------------------------------------------------


class FirestoreFake:
    """Documents by full name, open transactions, and the switches tests flip."""

    def __init__(self) -> None:
        self.documents: dict[str, tuple[Any, int, int]] = {}  # name -> (doc, created, updated)
        self.transactions: dict[bytes, dict[str, int]] = {}  # id -> {name: update time or 0}
        self.lock = threading.RLock()
        self.clock = 0
        self.faults: list[dict[str, Any]] = []
        self.missing_databases: set[str] = set()
        self.forbidden_databases: set[str] = set()
        self.strict_indexes = False
        self.calls: dict[str, int] = {}

    # -- helpers ----------------------------------------------------------------------------

    def now(self) -> int:
        with self.lock:
            self.clock = max(time.time_ns() // 1000 * 1000, self.clock + 1000)
            return self.clock

    @staticmethod
    def timestamp(ns: int) -> Any:
        return timestamp_pb2.Timestamp(seconds=ns // 10**9, nanos=ns % 10**9)

    def check(self, method: str, database: str) -> dict[str, Any] | None:
        """Raise a configured failure for this call; returns an after-the-fact fault, if any."""
        self.calls[method] = self.calls.get(method, 0) + 1
        db = database.split("/documents")[0]
        project = db.split("/")[1] if db.count("/") >= 3 else "?"
        if db in self.missing_databases:
            raise Abort(
                grpc.StatusCode.NOT_FOUND,
                f"The database {db.split('/')[-1]} does not exist for project {project} Please "
                f"visit https://console.cloud.google.com/datastore/setup?project={project} to add "
                "a Cloud Datastore or Cloud Firestore database.",
            )
        if db in self.forbidden_databases:
            raise Abort(grpc.StatusCode.PERMISSION_DENIED, "Missing or insufficient permissions.")
        with self.lock:
            for fault in self.faults:
                if fault["method"] == method and fault["times"] > 0:
                    fault["times"] -= 1
                    if not fault.get("after"):
                        raise Abort(grpc.StatusCode[fault["code"]], "injected fault")
                    return fault
        return None

    def read(self, name: str, transaction: bytes | None) -> tuple[Any, int] | None:
        with self.lock:
            found = self.documents.get(name)
            if transaction:
                reads = self.transaction(transaction)
                reads.setdefault(name, found[2] if found else 0)
            return (found[0], found[2]) if found else None

    def transaction(self, transaction: bytes) -> dict[str, int]:
        reads = self.transactions.get(transaction)
        if reads is None:
            raise Abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "The referenced transaction has expired or is no longer valid.",
            )
        return reads

    def stamped(self, doc: Any, created: int, updated: int) -> Any:
        out = Document()
        out.CopyFrom(doc)
        out.create_time.CopyFrom(self.timestamp(created))
        out.update_time.CopyFrom(self.timestamp(updated))
        return out

    # -- RPCs -------------------------------------------------------------------------------

    def batch_get_documents(self, request: Any, context: Any) -> Iterator[Any]:
        self.check("BatchGetDocuments", request.database)
        Response = firestore_types.BatchGetDocumentsResponse.pb()
        transaction = request.transaction or None
        if request.WhichOneof("consistency_selector") == "new_transaction":
            transaction = self.begin()
        now = self.timestamp(self.now())
        for name in request.documents:
            found = self.read(name, transaction)
            response = Response(read_time=now)
            if found is None:
                response.missing = name
            else:
                with self.lock:
                    _, created, updated = self.documents[name]
                response.found.CopyFrom(self.stamped(found[0], created, updated))
            if request.WhichOneof("consistency_selector") == "new_transaction":
                response.transaction = transaction
            yield response

    def run_query(self, request: Any, context: Any) -> Iterator[Any]:
        self.check("RunQuery", request.parent)
        if request.WhichOneof("consistency_selector") in ("transaction", "new_transaction"):
            raise Abort(grpc.StatusCode.UNIMPLEMENTED, "queries in transactions are not used")
        query = request.structured_query
        sources = query.from_
        if len(sources) != 1 or sources[0].all_descendants:
            raise Abort(grpc.StatusCode.UNIMPLEMENTED, "one collection per query in this fake")
        if query.HasField("start_at") or query.HasField("end_at"):
            raise Abort(grpc.StatusCode.UNIMPLEMENTED, "cursors are not used by the store")
        self.check_indexes(query)
        prefix = f"{request.parent}/{sources[0].collection_id}/"
        with self.lock:
            rows = [
                (doc, created, updated)
                for name, (doc, created, updated) in self.documents.items()
                if name.startswith(prefix) and "/" not in name[len(prefix) :]
            ]
        rows = [row for row in rows if filter_matches(row[0], query.where)]
        orders = [(o.field.field_path, o.direction) for o in query.order_by]
        _, unequal = query_fields(query.where)
        for path in sorted(unequal - {p for p, _ in orders}):
            orders.append((path, StructuredQuery.Direction.ASCENDING))
        if all(p != "__name__" for p, _ in orders):
            last = orders[-1][1] if orders else StructuredQuery.Direction.ASCENDING
            orders.append(("__name__", last))
        rows = [row for row in rows if all(field_value(row[0], p) is not None for p, _ in orders)]
        for path, direction in reversed(orders):
            rows.sort(
                key=lambda row, path=path: order_key(field_value(row[0], path)),
                reverse=direction == StructuredQuery.Direction.DESCENDING,
            )
        rows = rows[query.offset :]
        if query.HasField("limit"):
            rows = rows[: query.limit.value]
        Response = firestore_types.RunQueryResponse.pb()
        now = self.timestamp(self.now())
        if not rows:
            yield Response(read_time=now)
        for doc, created, updated in rows:
            out = self.stamped(doc, created, updated)
            if query.HasField("select"):
                keep = {FieldPath.from_api_repr(f.field_path).parts[0] for f in query.select.fields}
                for key in list(out.fields):
                    if key not in keep:
                        del out.fields[key]
            yield Response(document=out, read_time=now)

    def check_indexes(self, query: Any) -> None:
        """With ``strict_indexes``, refuse what needs a composite index, as Firestore does."""
        if not self.strict_indexes:
            return
        equal, unequal = query_fields(query.where)
        ordered = {o.field.field_path for o in query.order_by} - {"__name__"}
        if (equal and (unequal or ordered - equal)) or len(unequal | ordered) > 1:
            raise Abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "The query requires an index. You can create it here: https://console.firebase"
                ".google.com/v1/r/project/agentenv-test/firestore/indexes?create_composite=fake",
            )

    def begin(self) -> bytes:
        transaction = uuid.uuid4().bytes
        with self.lock:
            self.transactions[transaction] = {}
        return transaction

    def begin_transaction(self, request: Any, context: Any) -> Any:
        self.check("BeginTransaction", request.database)
        return firestore_types.BeginTransactionResponse.pb()(transaction=self.begin())

    def rollback(self, request: Any, context: Any) -> Any:
        self.check("Rollback", request.database)
        with self.lock:
            self.transactions.pop(request.transaction, None)
        return empty_pb2.Empty()

    def commit(self, request: Any, context: Any) -> Any:
        after = self.check("Commit", request.database)
        with self.lock:
            if request.transaction:
                reads = self.transaction(request.transaction)
                del self.transactions[request.transaction]
                for name, seen in reads.items():
                    current = self.documents.get(name)
                    if (current[2] if current else 0) != seen:
                        raise Abort(
                            grpc.StatusCode.ABORTED,
                            "Transaction lock timeout / contention: a document it read changed.",
                        )
            planned = dict(self.documents)
            now = self.now()
            results = []
            for write in request.writes:
                results.append(self.apply(planned, write, now))
            self.documents = planned
        if after:
            raise Abort(grpc.StatusCode[after["code"]], "injected fault after the commit applied")
        Response = firestore_types.CommitResponse.pb()
        return Response(
            write_results=[
                write_types.WriteResult.pb()(update_time=self.timestamp(t)) for t in results
            ],
            commit_time=self.timestamp(now),
        )

    def apply(self, documents: dict[str, tuple[Any, int, int]], write: Any, now: int) -> int:
        operation = write.WhichOneof("operation")
        name = write.update.name if operation == "update" else write.delete
        current = documents.get(name)
        if write.HasField("current_document"):
            condition = write.current_document
            if condition.WhichOneof("condition_type") == "exists":
                if condition.exists and current is None:
                    raise Abort(grpc.StatusCode.NOT_FOUND, f"No document to update: {name}")
                if not condition.exists and current is not None:
                    raise Abort(grpc.StatusCode.ALREADY_EXISTS, f"Document already exists: {name}")
            else:
                wanted = condition.update_time.seconds * 10**9 + condition.update_time.nanos
                if current is None or current[2] != wanted:
                    raise Abort(
                        grpc.StatusCode.FAILED_PRECONDITION, f"update_time mismatch: {name}"
                    )
        if len(write.update_transforms) or operation == "transform":
            raise Abort(grpc.StatusCode.UNIMPLEMENTED, "field transforms are not used by the store")
        if operation == "delete":
            documents.pop(name, None)
            return now
        doc = Document(name=name)
        if write.HasField("update_mask"):
            if current is not None:
                doc.CopyFrom(current[0])
            for path in write.update_mask.field_paths:
                parts = FieldPath.from_api_repr(path).parts
                if len(parts) != 1:
                    raise Abort(grpc.StatusCode.UNIMPLEMENTED, "nested masks are not used")
                if parts[0] in write.update.fields:
                    doc.fields[parts[0]].CopyFrom(write.update.fields[parts[0]])
                else:
                    doc.fields.pop(parts[0], None)
        else:
            for key, value in write.update.fields.items():
                doc.fields[key].CopyFrom(value)
        documents[name] = (doc, current[1] if current else now, now)
        return now


def _unary(fake: FirestoreFake, method: Any, request_type: Any, response_type: Any) -> Any:
    def handler(request: Any, context: Any) -> Any:
        try:
            return method(request, context)
        except Abort as abort:
            context.abort(abort.code, abort.message)

    return grpc.unary_unary_rpc_method_handler(
        handler,
        request_deserializer=request_type.pb().FromString,
        response_serializer=lambda message: message.SerializeToString(),
    )


def _stream(fake: FirestoreFake, method: Any, request_type: Any) -> Any:
    def handler(request: Any, context: Any) -> Iterator[Any]:
        try:
            yield from method(request, context)
        except Abort as abort:
            context.abort(abort.code, abort.message)

    return grpc.unary_stream_rpc_method_handler(
        handler,
        request_deserializer=request_type.pb().FromString,
        response_serializer=lambda message: message.SerializeToString(),
    )


def start(port: int = 0) -> tuple[grpc.Server, FirestoreFake, int]:
    """A started server on 127.0.0.1 (``port`` 0: a free one): ``(server, fake, port)``."""
    fake = FirestoreFake()
    handlers = {
        "BatchGetDocuments": _stream(
            fake, fake.batch_get_documents, firestore_types.BatchGetDocumentsRequest
        ),
        "RunQuery": _stream(fake, fake.run_query, firestore_types.RunQueryRequest),
        "BeginTransaction": _unary(
            fake, fake.begin_transaction, firestore_types.BeginTransactionRequest, None
        ),
        "Commit": _unary(fake, fake.commit, firestore_types.CommitRequest, None),
        "Rollback": _unary(fake, fake.rollback, firestore_types.RollbackRequest, None),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, fake, port


def _control(fake: FirestoreFake, command: dict[str, Any]) -> None:
    with fake.lock:
        if "fault" in command:
            fake.faults.append(command["fault"])
        if "missing_database" in command:
            fake.missing_databases.add(command["missing_database"])
        if "forbidden_database" in command:
            fake.forbidden_databases.add(command["forbidden_database"])
        if "strict_indexes" in command:
            fake.strict_indexes = bool(command["strict_indexes"])
        if command.get("reset"):
            fake.faults.clear()
            fake.strict_indexes = False


def main() -> None:
    server, fake, port = start(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(json.dumps({"port": port}), flush=True)
    for line in sys.stdin:  # one JSON command a line; ends when the test session closes stdin
        if line.strip():
            _control(fake, json.loads(line))
            print(json.dumps({"ok": True, "calls": fake.calls}), flush=True)
    server.stop(0)


if __name__ == "__main__":
    main()

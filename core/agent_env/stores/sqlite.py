"""The local document store: one SQLite file, JSON documents, expression indexes.

Why it is shaped this way:

* one table per collection (``docs_<name>``: ``id`` primary key, ``data`` canonical JSON), so an
  index is an ordinary SQLite index on ``json_extract(data, '$.field')`` and filters compile
  to the same expressions, which lets the planner use them (see :meth:`explain`);
* WAL mode, a busy timeout and ``BEGIN IMMEDIATE`` for every write, so two ``agent-env``
  processes (and threads, each with its own connection) can write at once without
  ``database is locked`` errors or lost updates; read-modify-write updates run inside that
  transaction;
* TTL settings live in a small table so every process sees them; expired rows are filtered out
  of every read and purged by writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_env.stores import query as q
from agent_env.stores.base import (
    Document,
    DocumentStore,
    DuplicateKeyError,
    Filter,
    InvalidQuery,
    Sort,
    StoreError,
)

_TTL_TABLE = "_agent_env_ttl"
_NUMBER = "('integer','real')"


def _json_path(path: str) -> str:
    return f"'$.{path}'"  # validated paths only: letters, digits, '_' and '.'


def _value_expr(path: str) -> str:
    return "id" if path == q.ID_FIELD else f"json_extract(data, {_json_path(path)})"


def _type_expr(path: str) -> str:
    return "'text'" if path == q.ID_FIELD else f"json_type(data, {_json_path(path)})"


def _equal_sql(path: str, operand: Any, params: list[Any]) -> str:
    """SQL true when the field equals ``operand`` (NULL or 0 otherwise: never cross-type)."""
    value, kind = _value_expr(path), _type_expr(path)
    if operand is None:
        return "0" if path == q.ID_FIELD else f"({kind} IS NULL OR {kind} = 'null')"
    if isinstance(operand, bool):
        return f"({kind} = '{'true' if operand else 'false'}')"
    params.append(operand)
    if path == q.ID_FIELD:
        return f"({value} = ?)" if isinstance(operand, str) else "(0 AND ? IS NULL)"
    if isinstance(operand, str):
        if not operand.startswith(("{", "[")):
            # json_extract gives TEXT only for JSON strings and for objects/arrays (as their
            # JSON text, which starts with { or [): any other equal TEXT is a string. Without
            # the json_type check an index answers the condition alone, with no row read (a
            # filtered count over 50,000 runs: 68 ms -> 2 ms).
            return f"({value} = ?)"
        return f"({kind} = 'text' AND {value} = ?)"
    return f"({kind} IN {_NUMBER} AND {value} = ?)"


def _condition_sql(path: str, op: str, operand: Any, params: list[Any]) -> str:
    if op == "$eq":
        return _equal_sql(path, operand, params)
    if op == "$ne":
        return f"(NOT COALESCE({_equal_sql(path, operand, params)}, 0))"
    if op == "$in":
        if not operand:
            return "0"
        return "(" + " OR ".join(_equal_sql(path, v, params) for v in operand) + ")"
    if op == "$exists":
        if path == q.ID_FIELD:
            return "1" if operand else "0"
        return f"({_type_expr(path)} IS {'NOT ' if operand else ''}NULL)"
    sql_op = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
    params.append(operand)
    wanted = "= 'text'" if isinstance(operand, str) else f"IN {_NUMBER}"
    return f"({_type_expr(path)} {wanted} AND {_value_expr(path)} {sql_op} ?)"


def _index_name(
    collection: str, spec: list[tuple[str, int]], unique: bool, ttl: float | None
) -> str:
    import hashlib

    body = "__".join(p.replace(".", "_") + ("_desc" if d < 0 else "") for p, d in spec)
    digest = hashlib.sha1(json.dumps([spec, unique, ttl]).encode()).hexdigest()[:6]
    return f"{'ux' if unique else 'ix'}_{collection}__{body}_{digest}"


class SqliteDocumentStore(DocumentStore):
    """:class:`DocumentStore` in a SQLite file; safe across threads and processes."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "NORMAL",
    ) -> None:
        self.path = Path(path).expanduser()
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise InvalidQuery(
                f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}"
            )
        self.busy_timeout = float(busy_timeout)
        self.synchronous = synchronous.upper()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()
        self._reset_process_state()

    def _reset_process_state(self) -> None:
        """Fresh connection state (also after ``fork``: a child never reuses a parent's handle)."""
        self._pid = os.getpid()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._tables: set[str] = set()
        self._indexes: set[str] = set()
        self._ttl: dict[str, list[tuple[str, float]]] = {}
        self._ttl_schema: int | None = None
        self._closed = False

    # -- connections and transactions ------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._reset_process_state()
        if self._closed:
            raise StoreError(f"the document store {self.path} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            str(self.path), timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        deadline = time.monotonic() + self.busy_timeout
        while True:  # switching a brand-new file to WAL can race another process doing the same
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {_TTL_TABLE} (collection TEXT NOT NULL, "
                    "field TEXT NOT NULL, ttl REAL NOT NULL, PRIMARY KEY (collection, field))"
                )
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        with contextlib.suppress(OSError):
            self.path.chmod(0o600)
        return conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no upgrade deadlocks)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()
            self._closed = True

    # -- schema ----------------------------------------------------------------------------

    def _table(self, collection: str) -> str:
        q.validate_collection(collection)
        name = f"docs_{collection}"
        conn = self._conn()
        if name not in self._tables:
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{name}" '
                "(id TEXT PRIMARY KEY NOT NULL, data TEXT NOT NULL)"
            )
            self._tables.add(name)
        return f'"{name}"'

    def _ttl_fields(self, conn: sqlite3.Connection, collection: str) -> list[tuple[str, float]]:
        """TTL settings, re-read whenever the schema changed (``ensure_index`` changes it)."""
        schema = conn.execute("PRAGMA schema_version").fetchone()[0]
        if schema != self._ttl_schema:
            table: dict[str, list[tuple[str, float]]] = {}
            for coll, field, ttl in conn.execute(
                f"SELECT collection, field, ttl FROM {_TTL_TABLE}"
            ):
                table.setdefault(coll, []).append((field, float(ttl)))
            self._ttl, self._ttl_schema = table, schema
        return self._ttl.get(collection, [])

    def _where(
        self, conn: sqlite3.Connection, collection: str, filter: Filter | None
    ) -> tuple[str, list[Any]]:
        params: list[Any] = []
        clauses = [_condition_sql(p, op, v, params) for p, op, v in q.normalize_filter(filter)]
        now = time.time()
        for field, ttl in self._ttl_fields(conn, collection):
            kind, value = _type_expr(field), _value_expr(field)
            clauses.append(f"(NOT COALESCE(({kind} IN {_NUMBER} AND {value} <= ?), 0))")
            params.append(now - ttl)
        return (" AND ".join(clauses) or "1"), params

    def _purge_expired(self, conn: sqlite3.Connection, collection: str, table: str) -> None:
        now = time.time()
        for field, ttl in self._ttl_fields(conn, collection):
            kind, value = _type_expr(field), _value_expr(field)
            conn.execute(
                f"DELETE FROM {table} WHERE {kind} IN {_NUMBER} AND {value} <= ?", (now - ttl,)
            )

    @staticmethod
    def _order(sort: Sort | None) -> str:
        spec = q.normalize_sort(sort)
        if not spec:
            return "rowid"
        parts = [f"{_value_expr(p)} {'DESC' if d < 0 else 'ASC'}" for p, d in spec]
        # Ties in insertion order, scanned the same way as the last key so an index still serves.
        parts.append(f"rowid {'DESC' if spec[-1][1] < 0 else 'ASC'}")
        return ", ".join(parts)

    def _select_sql(
        self,
        collection: str,
        filter: Filter | None,
        sort: Sort | None,
        limit: int | None,
        offset: int,
    ) -> tuple[str, list[Any]]:
        q.check_page(limit, offset)
        table = self._table(collection)
        where, params = self._where(self._conn(), collection, filter)
        sql = f"SELECT data FROM {table} WHERE {where} ORDER BY {self._order(sort)}"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset]
        return sql, params

    # -- reads -----------------------------------------------------------------------------

    def query(
        self,
        collection: str,
        filter: Filter | None = None,
        *,
        sort: Sort | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Document]:
        sql, params = self._select_sql(collection, filter, sort, limit, offset)
        return [json.loads(row[0]) for row in self._conn().execute(sql, params)]

    def find_one(
        self, collection: str, filter: Filter | None = None, *, sort: Sort | None = None
    ) -> Document | None:
        found = self.query(collection, filter, sort=sort, limit=1)
        return found[0] if found else None

    def count(self, collection: str, filter: Filter | None = None) -> int:
        table = self._table(collection)
        conn = self._conn()
        where, params = self._where(conn, collection, filter)
        return int(
            conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", params).fetchone()[0]
        )

    def explain(
        self,
        collection: str,
        filter: Filter | None = None,
        *,
        sort: Sort | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[str]:
        """SQLite's query plan for :meth:`query` with these arguments (to check index use)."""
        sql, params = self._select_sql(collection, filter, sort, limit, offset)
        return [row[3] for row in self._conn().execute(f"EXPLAIN QUERY PLAN {sql}", params)]

    # -- writes ----------------------------------------------------------------------------

    def _duplicate(
        self, exc: sqlite3.IntegrityError, collection: str, doc_id: str
    ) -> DuplicateKeyError:
        text = str(exc)
        if "index '" in text:
            index = text.split("index '", 1)[1].rstrip("'")
            return DuplicateKeyError(
                f"{collection}: a document with the same key for unique index {index} exists",
                collection=collection,
                index=index,
            )
        return DuplicateKeyError(
            f"{collection}: a document with _id {doc_id!r} already exists",
            collection=collection,
            index="_id",
        )

    def insert(self, collection: str, document: Mapping[str, Any]) -> str:
        doc = q.prepare_document(document, new_id=uuid.uuid4().hex)
        table = self._table(collection)
        with self._write() as conn:
            self._purge_expired(conn, collection, table)
            try:
                conn.execute(
                    f"INSERT INTO {table} (id, data) VALUES (?, ?)", (doc["_id"], q.dumps(doc))
                )
            except sqlite3.IntegrityError as exc:
                raise self._duplicate(exc, collection, doc["_id"]) from None
        return str(doc["_id"])

    def update(
        self,
        collection: str,
        filter: Filter,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        many: bool = False,
    ) -> int:
        q.normalize_update(changes)
        table = self._table(collection)
        with self._write() as conn:
            self._purge_expired(conn, collection, table)
            where, params = self._where(conn, collection, filter)
            sql = f"SELECT id, data FROM {table} WHERE {where} ORDER BY rowid"
            rows = conn.execute(sql + ("" if many else " LIMIT 1"), params).fetchall()
            for doc_id, data in rows:
                new = q.apply_update(json.loads(data), changes)
                new["_id"] = doc_id
                try:
                    conn.execute(
                        f"UPDATE {table} SET data = ? WHERE id = ?", (q.dumps(new), doc_id)
                    )
                except sqlite3.IntegrityError as exc:
                    raise self._duplicate(exc, collection, doc_id) from None
        return len(rows)

    def replace(self, collection: str, filter: Filter, document: Mapping[str, Any]) -> bool:
        table = self._table(collection)
        with self._write() as conn:
            self._purge_expired(conn, collection, table)
            where, params = self._where(conn, collection, filter)
            row = conn.execute(
                f"SELECT id FROM {table} WHERE {where} ORDER BY rowid LIMIT 1", params
            ).fetchone()
            if row is None:
                return False
            doc = q.prepare_document(document, new_id=row[0])
            if doc["_id"] != row[0]:
                raise InvalidQuery(f"replace cannot change _id ({row[0]!r} -> {doc['_id']!r})")
            try:
                conn.execute(f"UPDATE {table} SET data = ? WHERE id = ?", (q.dumps(doc), row[0]))
            except sqlite3.IntegrityError as exc:
                raise self._duplicate(exc, collection, row[0]) from None
        return True

    def delete(self, collection: str, filter: Filter) -> int:
        if filter is None:
            raise InvalidQuery("delete needs a filter (pass {} to delete every document)")
        table = self._table(collection)
        with self._write() as conn:
            self._purge_expired(conn, collection, table)
            where, params = self._where(conn, collection, filter)
            return conn.execute(f"DELETE FROM {table} WHERE {where}", params).rowcount

    def ensure_index(
        self,
        collection: str,
        fields: Sequence[str | tuple[str, int]],
        *,
        unique: bool = False,
        ttl: float | None = None,
    ) -> str:
        spec = q.index_fields(fields, unique=unique, ttl=ttl)
        table = self._table(collection)
        name = _index_name(collection, spec, unique, ttl)
        if name in self._indexes:
            return name
        columns = ", ".join(f"{_value_expr(p)}{' DESC' if d < 0 else ''}" for p, d in spec)
        with self._write() as conn:
            try:
                conn.execute(
                    f'CREATE {"UNIQUE " if unique else ""}INDEX IF NOT EXISTS "{name}" '
                    f"ON {table} ({columns})"
                )
            except sqlite3.IntegrityError:
                raise DuplicateKeyError(
                    f"{collection}: cannot create unique index on {[p for p, _ in spec]}: "
                    "existing documents share a key",
                    collection=collection,
                    index=name,
                ) from None
            if ttl is not None:
                conn.execute(
                    f"INSERT INTO {_TTL_TABLE} (collection, field, ttl) VALUES (?, ?, ?) "
                    "ON CONFLICT (collection, field) DO UPDATE SET ttl = excluded.ttl",
                    (collection, spec[0][0], float(ttl)),
                )
        self._indexes.add(name)
        return name

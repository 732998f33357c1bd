"""The DynamoDB document store (``[stores] document = "dynamodb"``).

Settings (``[stores.document]``): ``table`` (default ``agentenv-documents``), ``create_table``
(create a missing table, on-demand billing, TTL on ``exp``; else a missing table is an error
saying how to create it), ``region``, ``endpoint_url``, credentials as for every AWS store,
``max_attempts``, ``index_cache_seconds`` (how long a process reuses a collection's index list,
default 2).

**One table, many item kinds.** Collections come and go freely (every conformance test makes
new ones) while DynamoDB tables take a while to create, so every collection lives in one table
keyed by two strings, ``pk`` and ``sk``:

=====================  ==================================  ==============================
item                   pk                                  sk
=====================  ==================================  ==============================
a document             ``d|<collection>``                  ``_id``
its index list         ``m|<collection>``                  ``indexes``
an index item          ``i|<coll>|<index>|<1st value>``    ``<2nd value>\\0i<_id>``
a unique index's item  ``i|<coll>|<index>|<1st value>``    ``<2nd value>\\0u<all values>``
=====================  ==================================  ==============================

A unique index's item is keyed by the indexed values, not the ``_id``, so it is also the
index's lock: two documents with the same values would need the same item.

A document item holds the canonical JSON (``doc``), a revision (``rev``), the token of the write
that made it (``w``) and the keys of the index items it owns (``keys``). Every write is one
``TransactWriteItems``: the document (conditioned on its revision: optimistic concurrency, so
concurrent ``$inc`` never lose an increment), a check that the index list is unchanged (so a
writer never misses an index created meanwhile), the unique-index items it takes (conditioned on
being free: that is what makes unique indexes unique) and the index items it adds or drops.

**Reads** filter and sort with the reference semantics of :mod:`agent_env.stores.query`, so
DynamoDB's looser typing never changes a result. Candidates come from the cheapest source: a
``GetItem`` for ``_id``, one index partition when the filter fixes an index's first field (in
index order, stopping early for ``find_one(..., sort=<2nd field>)``: "latest version" is one
short ``Query``), else the collection's partition. Reads are strongly consistent.

**TTL**: a TTL index's documents get ``exp`` (DynamoDB's own TTL attribute, which deletes them
eventually) and every read hides documents whose time has passed. A lock held by an expired or
vanished document is released by the next writer that needs it.

**Retries**: botocore retries throttling and transient errors; a write retried after a lost
answer carries the same ``ClientRequestToken`` (DynamoDB then does not apply it twice), and a
refusal of a write whose document already carries our token is recognised as our own write, so
an insert is never reported as a duplicate of itself (and versioned entities never get a
second copy of the same version).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from agent_env.api import ConfigError, DocumentStore, DuplicateKeyError, StoreError
from agent_env.api import query as q
from agentenv_aws_stores.aws import (
    AwsClient,
    AwsClientUser,
    AwsSettings,
    AwsStoreError,
    ResourceMissing,
    error_code,
    error_message,
    raise_for,
)

#: The document-store interface's shapes (``agent_env.api`` exports the interface, not these).
Document = dict[str, Any]
Filter = Mapping[str, Any]
Sort = str | Sequence[str | tuple[str, int]]

MAX_ATTEMPTS = 200  # optimistic-concurrency rounds before giving up (each backs off a little)
MAX_TRANSACTION_ITEMS = 100
_SEP = "\x00"  # sorts before every other character: "ab" < "abc" in entry sort keys
_MAX_TEXT = 300  # bytes of a text value kept in a sort key (longer ones may tie: reads re-sort)
_IN_LIMIT = 25  # an $in on an index's first field with more values reads the whole collection


# --- encodings of values in keys ------------------------------------------------------------


def _normal(value: Any) -> Any:
    """JSON value with integral floats as ints, so ``1`` and ``1.0`` key the same."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


def _short(text: str, limit: int) -> str:
    """``text``, or a digest of it when it would not fit in a DynamoDB key."""
    if len(text.encode("utf-8")) <= limit:
        return text
    return "h:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def equality_key(value: Any) -> str:
    """A key equal for exactly the scalars the query language calls equal (never cross-type)."""
    if isinstance(value, bool):
        text = "b:" + ("true" if value else "false")
    elif isinstance(value, int | float):
        text = "n:" + repr(_normal(value))
    elif isinstance(value, str):
        text = "s:" + value
    else:  # a list or an object: only ever part of a unique key, never filtered on
        text = "j:" + json.dumps(_normal(value), sort_keys=True, separators=(",", ":"))
    return _short(text, 512)


def _sortable_number(value: float | int) -> str:
    """16 hex digits whose string order is the numeric order (IEEE 754 bits, sign-flipped)."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    bits = struct.unpack(">Q", struct.pack(">d", number))[0]
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | (1 << 63)
    return f"{bits:016x}"


def sort_key(value: Any) -> str:
    """A string whose order follows :func:`agent_env.stores.query.sort_documents`'s order.

    Missing and null < booleans < numbers < text < anything else. Very long texts and ints
    beyond a double's precision may tie here though they differ; reads re-sort exactly.
    """
    if value is q.MISSING or value is None:
        return "0"
    if isinstance(value, bool):
        return "1" + ("1" if value else "0")
    if isinstance(value, int | float):
        return "2" + _sortable_number(value)
    if isinstance(value, str):
        return "3" + value.encode("utf-8")[:_MAX_TEXT].decode("utf-8", errors="ignore")
    return "4"


def _id_part(id: str) -> str:
    """An ``_id`` as the tail of an entry's sort key: short and free of the separator."""
    if _SEP in id or len(id.encode("utf-8")) > 500:
        return "h:" + hashlib.sha256(id.encode("utf-8")).hexdigest()
    return id


# --- records ---------------------------------------------------------------------------------


@attrs.frozen
class IndexSpec:
    """One ``ensure_index`` result, as kept in the collection's index list."""

    name: str
    fields: tuple[tuple[str, int], ...]
    unique: bool = False
    ttl: float | None = None
    ready: bool = False  # False while existing documents are being indexed

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fields": [list(f) for f in self.fields],
            "unique": self.unique,
            "ttl": self.ttl,
            "ready": self.ready,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexSpec:
        return cls(
            name=data["name"],
            fields=tuple((str(p), int(d)) for p, d in data["fields"]),
            unique=bool(data.get("unique")),
            ttl=data.get("ttl"),
            ready=bool(data.get("ready")),
        )


@attrs.frozen
class CollectionMeta:
    """A collection's indexes and their generation (bumped by every change to the list)."""

    gen: int = 0
    indexes: tuple[IndexSpec, ...] = ()

    def index(self, name: str) -> IndexSpec | None:
        return next((ix for ix in self.indexes if ix.name == name), None)

    def expired(self, doc: Mapping[str, Any], now: float) -> bool:
        for ix in self.indexes:
            if ix.ttl is None:
                continue
            value = q.get_path(doc, ix.fields[0][0])
            if isinstance(value, int | float) and not isinstance(value, bool):
                if value + ix.ttl <= now:
                    return True
        return False

    def expiry(self, doc: Mapping[str, Any]) -> int | None:
        """When DynamoDB's TTL may delete ``doc`` (the earliest of its TTL indexes)."""
        times = []
        for ix in self.indexes:
            value = q.get_path(doc, ix.fields[0][0]) if ix.ttl is not None else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                times.append(value + (ix.ttl or 0))
        finite = [t for t in times if math.isfinite(t)]
        return math.ceil(min(finite)) if finite else None


@attrs.frozen
class StoredDocument:
    """A document as read, with what optimistic concurrency needs to replace it."""

    doc: Document
    rev: int
    token: str
    keys: frozenset[tuple[str, str]]
    exp: int | None


@attrs.frozen
class _Derived:
    """An index item a document owns; ``lock`` when its key is the unique values."""

    pk: str
    sk: str
    index: str
    lock: bool


class _DocConflict(Exception):
    """The document's condition failed (it exists, or its revision moved on).

    ``current`` is the document as DynamoDB found it (``None``: absent), returned with the
    refusal (``ReturnValuesOnConditionCheckFailure``), which saves reading it again.
    """

    def __init__(self, current: StoredDocument | None) -> None:
        super().__init__("document condition failed")
        self.current = current


class _MetaChanged(Exception):
    """The collection's index list changed between reading it and writing."""


class _LockTaken(Exception):
    def __init__(self, item: _Derived) -> None:
        super().__init__(item.index)
        self.item = item


class _Contended(Exception):
    """DynamoDB cancelled the transaction for a concurrent one on the same items."""


def _index_name(spec: Sequence[tuple[str, int]], unique: bool, ttl: float | None) -> str:
    body = "__".join(p.replace(".", "_") + ("_desc" if d < 0 else "") for p, d in spec)
    digest = hashlib.sha1(json.dumps([list(spec), unique, ttl]).encode()).hexdigest()[:6]
    return _short(f"{'ux' if unique else 'ix'}_{body}_{digest}", 200)


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, min(0.25, 0.004 * (attempt + 1))))


# --- the store -------------------------------------------------------------------------------


class DynamoDocumentStore(AwsClientUser, DocumentStore):
    """:class:`DocumentStore` in one DynamoDB table (see the module docstring)."""

    def __init__(
        self,
        *,
        table: str = "agentenv-documents",
        create_table: bool = False,
        region: str | None = None,
        endpoint_url: str | None = None,
        profile: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        max_attempts: int = 6,
        index_cache_seconds: float = 2.0,
    ) -> None:
        if not isinstance(table, str) or not (3 <= len(table) <= 255):
            raise ConfigError(
                f"[stores.document] table must be a DynamoDB table name, not {table!r}"
            )
        self.table = table
        self.create_table = create_table
        self.aws = AwsSettings(region=region, endpoint_url=endpoint_url, profile=profile,
                               access_key_id=access_key_id, secret_access_key=secret_access_key,
                               session_token=session_token, max_attempts=max_attempts)
        self._clients = AwsClient(self.aws, "dynamodb", prepare=self._check_table)
        self.index_cache_seconds = float(index_cache_seconds)
        self._metas: dict[str, tuple[CollectionMeta, float]] = {}

    def __repr__(self) -> str:
        return f"DynamoDocumentStore(table={self.table!r}, aws={self.aws!r})"

    # -- the client and the table ---------------------------------------------------------

    def _check_table(self, client: Any) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            table = client.describe_table(TableName=self.table)["Table"]
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise_for(exc, "dynamodb:DescribeTable", f"table {self.table}")
            if not self.create_table:
                raise self._missing_table() from None
            table = self._create(client)
        except BotoCoreError as exc:
            raise_for(exc, "dynamodb:DescribeTable", f"table {self.table}")
        schema = {(k["AttributeName"], k["KeyType"]) for k in table.get("KeySchema", ())}
        if schema != {("pk", "HASH"), ("sk", "RANGE")}:
            raise AwsStoreError(
                f"DynamoDB table '{self.table}' has the key schema {sorted(schema)}; the document "
                "store needs pk (string, partition key) and sk (string, sort key): name another "
                "table in [stores.document] table"
            )
        if table.get("TableStatus") == "CREATING":
            client.get_waiter("table_exists").wait(TableName=self.table)

    def _create(self, client: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        try:
            client.create_table(
                TableName=self.table,
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":  # another process made it
                raise_for(exc, "dynamodb:CreateTable", f"table {self.table}")
        client.get_waiter("table_exists").wait(TableName=self.table)
        try:
            client.update_time_to_live(
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"},
            )
        except ClientError as exc:
            if error_code(exc) != "ValidationException":  # already enabled
                raise_for(exc, "dynamodb:UpdateTimeToLive", f"table {self.table}")
        return client.describe_table(TableName=self.table)["Table"]

    def _missing_table(self) -> ResourceMissing:
        region = self.aws.region or "the configured region"
        return ResourceMissing(
            f"DynamoDB table '{self.table}' does not exist ({region}): set create_table = true "
            f"in [stores.document], or create it with `aws dynamodb create-table --table-name "
            f"{self.table} --attribute-definitions AttributeName=pk,AttributeType=S "
            "AttributeName=sk,AttributeType=S --key-schema AttributeName=pk,KeyType=HASH "
            "AttributeName=sk,KeyType=RANGE --billing-mode PAY_PER_REQUEST`"
        )

    def _call(self, operation: str, action: str, **params: Any) -> Any:
        """One DynamoDB call with errors translated (TransactionCanceled passes through)."""
        from botocore.exceptions import BotoCoreError, ClientError

        client = self.client
        try:
            return getattr(client, operation)(**params)
        except ClientError as exc:
            code = error_code(exc)
            if code == "TransactionCanceledException":
                raise
            if code == "ResourceNotFoundException":
                self._table_checked = False
                raise self._missing_table() from None
            if code == "ValidationException" and "size" in error_message(exc).lower():
                raise StoreError(
                    "DynamoDB refused the item as too large (an item holds at most 400 KB and "
                    f"an _id at most 1 KB): {error_message(exc)}"
                ) from None
            raise_for(exc, action, f"table {self.table}")
        except BotoCoreError as exc:
            raise_for(exc, action, f"table {self.table}")

    # -- items ----------------------------------------------------------------------------

    @staticmethod
    def _doc_key(collection: str, id: str) -> dict[str, Any]:
        return {"pk": {"S": f"d|{collection}"}, "sk": {"S": id}}

    @staticmethod
    def _meta_key(collection: str) -> dict[str, Any]:
        return {"pk": {"S": f"m|{collection}"}, "sk": {"S": "indexes"}}

    @staticmethod
    def _parse_doc(item: Mapping[str, Any]) -> StoredDocument:
        return StoredDocument(
            doc=json.loads(item["doc"]["S"]),
            rev=int(item["rev"]["N"]),
            token=item.get("w", {}).get("S", ""),
            keys=frozenset(tuple(k) for k in json.loads(item.get("keys", {}).get("S", "[]"))),
            exp=int(item["exp"]["N"]) if "exp" in item else None,
        )

    def _meta(self, collection: str, *, fresh: bool = False) -> CollectionMeta:
        """The collection's index list, re-read when older than ``index_cache_seconds``.

        A stale list is safe for writes (their transaction checks the generation and they retry
        with a fresh one) and for reads, which use only ready indexes (never dropped); it only
        delays another process's new TTL index by up to ``index_cache_seconds``.
        """
        now = time.monotonic()
        cached = self._metas.get(collection)
        if not fresh and cached is not None and now - cached[1] < self.index_cache_seconds:
            return cached[0]
        meta = self._read_meta(collection)
        self._metas[collection] = (meta, now)
        return meta

    def _read_meta(self, collection: str) -> CollectionMeta:
        item = self._call(
            "get_item", "dynamodb:GetItem", TableName=self.table,
            Key=self._meta_key(collection), ConsistentRead=True,
        ).get("Item")
        if not item:
            return CollectionMeta()
        indexes = tuple(IndexSpec.from_json(i) for i in json.loads(item["indexes"]["S"]))
        return CollectionMeta(gen=int(item["gen"]["N"]), indexes=indexes)

    def _put_meta(self, collection: str, old: CollectionMeta, indexes: Sequence[IndexSpec]) -> bool:
        """Replace the index list if it is still ``old``; ``False`` when someone changed it."""
        from botocore.exceptions import ClientError

        condition = self._meta_condition(old)
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    **self._meta_key(collection),
                    "gen": {"N": str(old.gen + 1)},
                    "indexes": {"S": json.dumps([ix.to_json() for ix in indexes])},
                },
                **condition,
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise_for(exc, "dynamodb:PutItem", f"table {self.table}")
        return True

    @staticmethod
    def _meta_condition(meta: CollectionMeta) -> dict[str, Any]:
        if meta.gen == 0:
            return {"ConditionExpression": "attribute_not_exists(pk)"}
        return {
            "ConditionExpression": "gen = :gen",
            "ExpressionAttributeValues": {":gen": {"N": str(meta.gen)}},
        }

    def _get(self, collection: str, id: str) -> StoredDocument | None:
        item = self._call(
            "get_item", "dynamodb:GetItem", TableName=self.table,
            Key=self._doc_key(collection, id), ConsistentRead=True,
        ).get("Item")
        return self._parse_doc(item) if item else None

    def _get_many(self, collection: str, ids: Iterable[str]) -> dict[str, StoredDocument]:
        """Documents by id (absent ones left out), 100 per ``BatchGetItem``."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, StoredDocument] = {}
        for start in range(0, len(wanted), 100):
            keys = [self._doc_key(collection, id) for id in wanted[start : start + 100]]
            attempt = 0
            while keys:
                answer = self._call(
                    "batch_get_item", "dynamodb:BatchGetItem",
                    RequestItems={self.table: {"Keys": keys, "ConsistentRead": True}},
                )
                for item in answer.get("Responses", {}).get(self.table, ()):
                    found[item["sk"]["S"]] = self._parse_doc(item)
                keys = answer.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
                if keys:  # throttled part of the batch: back off and ask again
                    attempt += 1
                    time.sleep(min(2.0, 0.05 * 2**attempt) * random.random())
        return found

    def _query_pages(
        self, pk: str, *, forward: bool = True, page: int | None = None, prefix: str | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        params: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ConsistentRead": True,
            "ScanIndexForward": forward,
        }
        if prefix:
            params["KeyConditionExpression"] += " AND begins_with(sk, :prefix)"
            params["ExpressionAttributeValues"][":prefix"] = {"S": prefix}
        if page:
            params["Limit"] = page
        while True:
            answer = self._call("query", "dynamodb:Query", **params)
            yield answer.get("Items", [])
            if "LastEvaluatedKey" not in answer:
                return
            params["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    # -- derived items and the write transaction ------------------------------------------

    def _derived(self, collection: str, meta: CollectionMeta, doc: Document) -> dict[str, _Derived]:
        """The index items ``doc`` owns under ``meta``: one per index that covers it.

        An index item sits in the partition of the document's first-field value, sorted by its
        second-field value. For a unique index holding all its fields, the item's key ends with
        the indexed values instead of the ``_id``, so it is also the lock: a second document
        with the same values would need the same key.
        """
        out: dict[str, _Derived] = {}
        id = doc[q.ID_FIELD]
        for ix in meta.indexes:
            values = [q.get_path(doc, path) for path, _ in ix.fields]
            first = values[0]
            locks = ix.unique and all(v is not q.MISSING and v is not None for v in values)
            if not locks and not (q.is_scalar(first) and first is not None):
                continue  # no filter can fix this document's first field
            if locks:
                text = json.dumps(_normal(values), sort_keys=True, separators=(",", ":"))
                tail = "u" + _short(text, 600)
            else:
                tail = "i" + _id_part(id)
            item = _Derived(
                pk=f"i|{collection}|{ix.name}|{equality_key(first)}",
                sk=sort_key(values[1] if len(values) > 1 else None) + _SEP + tail,
                index=ix.name,
                lock=locks,
            )
            out[item.pk + _SEP + item.sk] = item
        return out

    def _commit(
        self,
        collection: str,
        meta: CollectionMeta,
        old: StoredDocument | None,
        new: Document | None,
        token: str,
        id: str,
    ) -> None:
        """Write ``new`` over ``old`` (insert when ``old`` is None, delete when ``new`` is).

        ``token`` marks the document as written by this logical write (kept across attempts).
        """
        from botocore.exceptions import ClientError

        derived = self._derived(collection, meta, new) if new is not None else {}
        exp = meta.expiry(new) if new is not None else None
        old_keys = old.keys if old is not None else frozenset()
        new_keys = frozenset((d.pk, d.sk) for d in derived.values())
        rewrite_all = old is None or exp != old.exp
        actions: list[dict[str, Any]] = []
        doc_key = self._doc_key(collection, id)
        doc_condition: dict[str, Any] = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if old is None:
            doc_condition["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            doc_condition["ConditionExpression"] = "rev = :rev"
            doc_condition["ExpressionAttributeValues"] = {":rev": {"N": str(old.rev)}}
        if new is None:
            actions.append({"Delete": {"TableName": self.table, "Key": doc_key, **doc_condition}})
        else:
            item = {
                **doc_key,
                "doc": {"S": q.dumps(new)},
                "rev": {"N": str((old.rev if old else 0) + 1)},
                "w": {"S": token},
                "keys": {"S": json.dumps(sorted([list(k) for k in new_keys]))},
            }
            if exp is not None:
                item["exp"] = {"N": str(exp)}
            actions.append({"Put": {"TableName": self.table, "Item": item, **doc_condition}})
        actions.append(
            {"ConditionCheck": {"TableName": self.table, "Key": self._meta_key(collection),
                                **self._meta_condition(meta)}}
        )
        locks: list[_Derived | None] = [None, None]  # the action index -> the lock it takes
        for d in derived.values():
            if (d.pk, d.sk) in old_keys and not rewrite_all:
                continue
            attrs_: dict[str, Any] = {"pk": {"S": d.pk}, "sk": {"S": d.sk}}
            attrs_["id"] = {"S": id}
            if exp is not None:
                attrs_["exp"] = {"N": str(exp)}
            put: dict[str, Any] = {"TableName": self.table, "Item": attrs_}
            if d.lock:
                put["ConditionExpression"] = "attribute_not_exists(pk) OR id = :id"
                put["ExpressionAttributeValues"] = {":id": {"S": id}}
            actions.append({"Put": put})
            locks.append(d if d.lock else None)
        for pk, sk in sorted(old_keys - new_keys):
            actions.append(
                {"Delete": {"TableName": self.table, "Key": {"pk": {"S": pk}, "sk": {"S": sk}}}}
            )
            locks.append(None)
        if len(actions) > MAX_TRANSACTION_ITEMS:
            raise StoreError(
                f"{collection}/{id}: a write touching {len(actions)} items is over DynamoDB's "
                f"{MAX_TRANSACTION_ITEMS}-item transaction limit (too many indexes)"
            )
        try:
            # A fresh request token per attempt: botocore's own retries of this call reuse it
            # (DynamoDB then applies it once), while a new attempt with new items must not.
            self._call(
                "transact_write_items", "dynamodb:TransactWriteItems",
                TransactItems=actions, ClientRequestToken=str(uuid.uuid4()),
            )
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            codes = [str(r.get("Code", "None")) for r in reasons]
            if any(c in ("TransactionConflict", "ThrottlingError") for c in codes):
                raise _Contended() from None
            if codes and codes[0] == "ConditionalCheckFailed":
                item = reasons[0].get("Item")
                raise _DocConflict(self._parse_doc(item) if item else None) from None
            if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                raise _MetaChanged() from None
            for position, code in enumerate(codes):
                lock = locks[position] if position < len(locks) else None
                if code == "ConditionalCheckFailed" and lock is not None:
                    raise _LockTaken(lock) from None
            raise StoreError(
                f"writing {collection}/{id} failed: {error_message(exc)} (reasons: {codes})"
            ) from None

    def _release_stale_lock(self, collection: str, meta: CollectionMeta, lock: _Derived) -> bool:
        """Free ``lock`` if its owner is gone, expired or no longer holds it; ``True`` if freed."""
        from botocore.exceptions import ClientError

        key = {"pk": {"S": lock.pk}, "sk": {"S": lock.sk}}
        item = self._call(
            "get_item", "dynamodb:GetItem", TableName=self.table, Key=key, ConsistentRead=True
        ).get("Item")
        if not item:
            return True  # freed meanwhile: try again
        owner = item["id"]["S"]
        stored = self._get(collection, owner)
        if stored is not None and meta.expired(stored.doc, time.time()):
            self._purge(collection, meta, owner, stored)
            return True
        if stored is not None and (lock.pk, lock.sk) in stored.keys:
            return False  # a live document holds it: a real duplicate
        try:
            self.client.delete_item(
                TableName=self.table, Key=key,
                ConditionExpression="id = :owner",
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise_for(exc, "dynamodb:DeleteItem", f"table {self.table}")
        return True

    def _purge(
        self, collection: str, meta: CollectionMeta, id: str, stored: StoredDocument
    ) -> None:
        """Delete an expired document and its index items (losing a race to another is fine)."""
        for _ in range(3):
            try:
                self._commit(collection, meta, stored, None, str(uuid.uuid4()), id)
                return
            except _MetaChanged:
                meta = self._meta(collection, fresh=True)
            except (_DocConflict, _Contended):
                return  # someone else changed or removed it first

    def _write(
        self,
        collection: str,
        id: str,
        current: StoredDocument | None,
        change: Callable[[Document | None], Document | bool | None],
        *,
        meta: CollectionMeta | None = None,
    ) -> bool:
        """Read-modify-write one document until it sticks; ``False`` when ``change`` declines.

        ``change(doc)`` gets the current document (``None`` when absent or expired) and returns
        the new document, ``None`` to delete it, or ``False`` to write nothing.
        """
        token = str(uuid.uuid4())
        for attempt in range(MAX_ATTEMPTS):
            if meta is None:
                meta = self._meta(collection)
            live = current if current and not meta.expired(current.doc, time.time()) else None
            new = change(live.doc if live else None)
            if new is False or (new is None and live is None):
                return False
            if current is not None and live is None:  # expired: clear it out of the way first
                self._purge(collection, meta, id, current)
                current, meta = self._get(collection, id), None
                continue
            try:
                self._commit(collection, meta, current, new, token, id)  # type: ignore[arg-type]
                return True
            except _DocConflict as conflict:
                current = conflict.current
                if new is not None and current is not None and current.token == token:
                    return True  # our own write landed; its retry was refused
                if new is None and current is None:
                    return True  # gone: deleted by us (a retried delete) or by someone else
            except _MetaChanged:
                meta = self._meta(collection, fresh=True)
                continue
            except _LockTaken as taken:
                if not self._release_stale_lock(collection, meta, taken.item):
                    raise DuplicateKeyError(
                        f"{collection}: the unique index {taken.item.index} already has a "
                        f"document with these values (writing {id!r})",
                        collection=collection, index=taken.item.index,
                    ) from None
            except _Contended:
                current = self._get(collection, id)
            _backoff(attempt)
            meta = None
        raise StoreError(f"{collection}/{id}: gave up after {MAX_ATTEMPTS} conflicting writes")

    # -- reads ----------------------------------------------------------------------------

    def _candidates(
        self,
        collection: str,
        meta: CollectionMeta,
        conditions: list[tuple[str, str, Any]],
        sort: list[tuple[str, int]],
        want: int | None,
        accept: Callable[[StoredDocument], bool],
    ) -> list[StoredDocument]:
        """The accepted documents from the cheapest source (see the module docstring)."""
        for path, op, operand in conditions:
            if path == q.ID_FIELD and op == "$eq":
                found = self._get(collection, operand) if isinstance(operand, str) else None
                return [found] if found and accept(found) else []
            if path == q.ID_FIELD and op == "$in":
                ids = [v for v in operand if isinstance(v, str)]
                return [s for s in self._get_many(collection, ids).values() if accept(s)]
        plan = self._pick_index(meta, conditions, sort)
        if plan is None:
            return [
                stored
                for page in self._query_pages(f"d|{collection}")
                for stored in map(self._parse_doc, page)
                if accept(stored)
            ]
        ix, values, second = plan
        in_index_order = len(sort) == 1 and len(ix.fields) > 1 and sort[0][0] == ix.fields[1][0]
        ordered = len(values) == 1 and (not sort or in_index_order)
        forward = not sort or sort[0][1] > 0
        return self._from_index(
            collection, ix, values, second, forward, want if ordered else None, accept
        )

    @staticmethod
    def _pick_index(
        meta: CollectionMeta, conditions: list[tuple[str, str, Any]], sort: list[tuple[str, int]]
    ) -> tuple[IndexSpec, list[Any], Any] | None:
        """The index whose first field the filter fixes, with the values to read it at.

        Preferred, in order: one whose second field the filter fixes too (one key prefix), one
        value rather than an ``$in`` of several, one whose second field is the sort field.
        """

        def fixed(path: str) -> list[Any] | None:
            for p, op, operand in conditions:
                if p == path and op == "$eq" and operand is not None:
                    return [operand]
            for p, op, operand in conditions:
                if p == path and op == "$in" and len(operand) <= _IN_LIMIT and None not in operand:
                    return list(operand)
            return None

        best: tuple[int, IndexSpec, list[Any], Any] | None = None
        for ix in meta.indexes:
            if not ix.ready:  # still being built (or failed): its entries are incomplete
                continue
            values = fixed(ix.fields[0][0])
            if values is None:
                continue
            second_values = fixed(ix.fields[1][0]) if len(ix.fields) > 1 else None
            second = second_values[0] if second_values and len(second_values) == 1 else q.MISSING
            sorted_by_second = len(ix.fields) > 1 and bool(sort) and sort[0][0] == ix.fields[1][0]
            score = (second is not q.MISSING) * 4 + (len(values) == 1) * 2 + sorted_by_second
            if best is None or score > best[0]:
                best = (score, ix, values, second)
        return (best[1], best[2], best[3]) if best else None

    def _from_index(
        self,
        collection: str,
        ix: IndexSpec,
        values: list[Any],
        second: Any,
        forward: bool,
        want: int | None,
        accept: Callable[[StoredDocument], bool],
    ) -> list[StoredDocument]:
        """Accepted documents through ``ix``'s entries for ``values`` of its first field.

        ``second`` (unless MISSING) narrows each partition to that second-field value. With
        ``want``, entries are read in index order and reading stops once ``want`` documents
        are accepted and the next entry's sort value differs from the last one accepted (sort
        keys may tie where values differ; the caller re-sorts exactly).
        """
        second_path = ix.fields[1][0] if len(ix.fields) > 1 else None
        prefix = None if second is q.MISSING else sort_key(second) + _SEP
        out: list[StoredDocument] = []
        seen: set[str] = set()
        for value in dict.fromkeys(equality_key(v) for v in values):
            pk = f"i|{collection}|{ix.name}|{value}"
            boundary: str | None = None
            page_size = None if want is None else want + 1
            for page in self._query_pages(pk, forward=forward, page=page_size, prefix=prefix):
                # sk = sort value + _SEP + id part (which never holds _SEP)
                entries = [(item["sk"]["S"].rpartition(_SEP)[0], item["id"]["S"]) for item in page]
                docs: dict[str, StoredDocument] = {}
                asked: set[str] = set()
                for position, (sv, id) in enumerate(entries):
                    if boundary is not None and sv != boundary:
                        return out
                    if id not in asked:  # fetch only as many documents as may still be needed
                        need = 100 if want is None else max(want - len(out), 1)
                        chunk = [i for _, i in entries[position : position + need]]
                        asked.update(chunk)
                        docs.update(self._get_many(collection, chunk))
                    stored = docs.get(id)
                    if stored is None or id in seen:
                        continue
                    if second_path is not None:  # a stale entry: the document has moved on
                        if sort_key(q.get_path(stored.doc, second_path)) != sv:
                            continue
                    seen.add(id)
                    if not accept(stored):
                        continue
                    out.append(stored)
                    if want is not None and len(out) >= want and boundary is None:
                        boundary = sv
        return out

    def _select(
        self,
        collection: str,
        filter: Filter | None,
        sort: Sort | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> tuple[CollectionMeta, list[StoredDocument]]:
        q.validate_collection(collection)
        conditions = q.normalize_filter(filter)
        order = q.normalize_sort(sort)
        q.check_page(limit, offset)
        if limit == 0:
            return CollectionMeta(), []
        meta = self._meta(collection)
        now = time.time()

        def accept(stored: StoredDocument) -> bool:
            return not meta.expired(stored.doc, now) and q.matches(stored.doc, filter)

        want = None if limit is None else offset + limit
        live = self._candidates(collection, meta, conditions, order, want, accept)
        if order:
            by_id = {id(s.doc): s for s in live}
            live = [by_id[id(d)] for d in q.sort_documents([s.doc for s in live], order)]
        end = None if limit is None else offset + limit
        return meta, live[offset:end]

    def find_one(
        self, collection: str, filter: Filter | None = None, *, sort: Sort | None = None
    ) -> Document | None:
        _, found = self._select(collection, filter, sort, limit=1)
        return found[0].doc if found else None

    def query(
        self,
        collection: str,
        filter: Filter | None = None,
        *,
        sort: Sort | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Document]:
        _, found = self._select(collection, filter, sort, limit, offset)
        return [s.doc for s in found]

    def count(self, collection: str, filter: Filter | None = None) -> int:
        return len(self._select(collection, filter)[1])

    # -- writes ---------------------------------------------------------------------------

    def insert(self, collection: str, document: Mapping[str, Any]) -> str:
        q.validate_collection(collection)
        doc = q.prepare_document(document, new_id=uuid.uuid4().hex)
        id = doc[q.ID_FIELD]

        def create(existing: Document | None) -> Document:
            if existing is not None:
                raise DuplicateKeyError(
                    f"{collection}: a document with _id {id!r} already exists",
                    collection=collection, index="_id",
                )
            return doc

        self._write(collection, id, None, create)
        return id

    def update(
        self,
        collection: str,
        filter: Filter,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        many: bool = False,
    ) -> int:
        q.normalize_update(changes)
        meta, targets = self._select(collection, filter, limit=None if many else 1)
        for target in targets:  # an update that cannot apply fails before anything is written
            q.apply_update(target.doc, changes)

        def change(doc: Document | None) -> Document | bool:
            if doc is None or not q.matches(doc, filter):
                return False
            return q.apply_update(doc, changes)

        return sum(
            self._write(collection, t.doc[q.ID_FIELD], t, change, meta=meta) for t in targets
        )

    def replace(self, collection: str, filter: Filter, document: Mapping[str, Any]) -> bool:
        q.prepare_document(document, new_id="-")  # refuse a bad document before any read
        meta, targets = self._select(collection, filter, limit=1)
        if not targets:
            return False
        id = targets[0].doc[q.ID_FIELD]
        new = q.prepare_document({**document, q.ID_FIELD: id})

        def change(doc: Document | None) -> Document | bool:
            return new if doc is not None and q.matches(doc, filter) else False

        return self._write(collection, id, targets[0], change, meta=meta)

    def delete(self, collection: str, filter: Filter) -> int:
        meta, targets = self._select(collection, filter)

        def change(doc: Document | None) -> bool | None:
            return None if doc is not None and q.matches(doc, filter) else False

        return sum(
            self._write(collection, t.doc[q.ID_FIELD], t, change, meta=meta) for t in targets
        )

    def ensure_index(
        self,
        collection: str,
        fields: Sequence[str | tuple[str, int]],
        *,
        unique: bool = False,
        ttl: float | None = None,
    ) -> str:
        q.validate_collection(collection)
        spec = q.index_fields(fields, unique=unique, ttl=ttl)
        ttl = None if ttl is None else float(ttl)
        name = _index_name(spec, unique, ttl)
        wanted = IndexSpec(name, tuple(spec), unique, ttl)
        for attempt in range(MAX_ATTEMPTS):
            meta = self._meta(collection, fresh=True)
            existing = meta.index(name)
            if existing is not None and existing.ready:
                return name
            if existing is None:
                if not self._put_meta(collection, meta, [*meta.indexes, wanted]):
                    _backoff(attempt)
                    continue
            try:
                self._backfill(collection)
            except DuplicateKeyError:
                self._drop_index(collection, name)
                raise
            meta = self._meta(collection, fresh=True)
            indexes = [attrs.evolve(ix, ready=True) if ix.name == name else ix
                       for ix in meta.indexes]
            if meta.index(name) is not None and self._put_meta(collection, meta, indexes):
                self._meta(collection, fresh=True)
                return name
            _backoff(attempt)
        raise StoreError(f"{collection}: gave up creating index {name} after {MAX_ATTEMPTS} tries")

    def _backfill(self, collection: str) -> None:
        """Give every existing document the index items the current index list asks for."""
        meta = self._meta(collection, fresh=True)
        for page in self._query_pages(f"d|{collection}"):
            for item in page:
                stored = self._parse_doc(item)
                id = stored.doc[q.ID_FIELD]
                derived = self._derived(collection, meta, stored.doc).values()
                wanted = {(d.pk, d.sk) for d in derived}
                if wanted == stored.keys and meta.expiry(stored.doc) == stored.exp:
                    continue
                self._write(collection, id, stored, lambda doc: doc if doc is not None else False)

    def _drop_index(self, collection: str, name: str) -> None:
        """Take a failed index out of the list (its items are released lazily, see locks)."""
        for attempt in range(MAX_ATTEMPTS):
            meta = self._meta(collection, fresh=True)
            if meta.index(name) is None:
                return
            if self._put_meta(collection, meta, [ix for ix in meta.indexes if ix.name != name]):
                return
            _backoff(attempt)

"""The DynamoDB document store on moto: the document and versioned-entity conformance suites,
then what is DynamoDB's own: the table, index items, retried writes and throttling."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_moto import LostAnswer, Throttle

from agent_env.stores.base import DuplicateKeyError
from agent_env.stores.versioned import VersionedStore
from agent_env.testing.store_conformance.document import DocumentStoreSuite
from agent_env.testing.store_conformance.versioned import VersionedStoreSuite
from agentenv_aws_stores.aws import ResourceMissing
from agentenv_aws_stores.dynamodb import DynamoDocumentStore, equality_key, sort_key


@pytest.fixture
def table(aws: dict[str, Any], unique_name: str) -> str:
    """A table per test: moto copies a whole table on every transaction, so keep them small."""
    DynamoDocumentStore(table=unique_name, create_table=True, **aws).count("warmup")
    return unique_name


@pytest.fixture
def documents_on(aws: dict[str, Any], table: str) -> Callable[[], DynamoDocumentStore]:
    return functools.partial(DynamoDocumentStore, table=table, **aws)


class TestDynamoDocumentStore(DocumentStoreSuite):
    @pytest.fixture
    def store(self, documents_on: Callable[[], DynamoDocumentStore]) -> Iterator[Any]:
        store = documents_on()
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, documents_on: Callable[[], DynamoDocumentStore]) -> Any:
        return documents_on


class TestVersionedOnDynamo(VersionedStoreSuite):
    @pytest.fixture
    def documents(self, documents_on: Callable[[], DynamoDocumentStore]) -> Any:
        return documents_on()

    @pytest.fixture
    def documents_factory(self, documents_on: Callable[[], DynamoDocumentStore]) -> Any:
        return documents_on


class Calls:
    """Counts the DynamoDB operations a store sends (a botocore ``before-call`` hook)."""

    def __init__(self, store: DynamoDocumentStore) -> None:
        self.names: list[str] = []
        store.client.meta.events.register("before-call.dynamodb", self)

    def __call__(self, model: Any, **_: Any) -> None:
        self.names.append(model.name)


def test_missing_table_is_one_line_naming_it(aws: dict[str, Any], unique_name: str) -> None:
    store = DynamoDocumentStore(table=unique_name, **aws)
    with pytest.raises(ResourceMissing) as caught:
        store.find_one("c", {"_id": "a"})
    message = str(caught.value)
    assert "\n" not in message and f"'{unique_name}'" in message
    assert "create_table = true" in message and "aws dynamodb create-table" in message


def test_table_created_on_demand(aws: dict[str, Any], unique_name: str, boto: Any) -> None:
    DynamoDocumentStore(table=unique_name, create_table=True, **aws).insert("c", {"_id": "a"})
    client = boto("dynamodb")
    assert client.describe_table(TableName=unique_name)["Table"]["TableStatus"] == "ACTIVE"
    ttl = client.describe_time_to_live(TableName=unique_name)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "exp"
    assert DynamoDocumentStore(table=unique_name, **aws).find_one("c") == {"_id": "a"}


def test_latest_version_is_one_short_query(documents_on: Any) -> None:
    store = documents_on()
    versioned = VersionedStore(store)
    kind = f"k{uuid.uuid4().hex[:8]}"
    for n in range(30):
        versioned.put(kind, "many", {"n": n})
    calls = Calls(store)
    original = store._query_pages
    limits: list[int | None] = []

    def spy(pk: str, **options: Any) -> Any:
        limits.append(options.get("page"))
        return original(pk, **options)

    store._query_pages = spy  # type: ignore[method-assign]
    latest = versioned.get(kind, "many")
    assert latest is not None and latest.version == 30
    # at most the index list (cached for a while), then one page of entries and the document
    assert calls.names in (["Query", "BatchGetItem"], ["GetItem", "Query", "BatchGetItem"])
    assert limits and all(limit is not None and limit < 30 for limit in limits)


def test_a_retried_insert_that_landed_is_not_a_duplicate(documents_on: Any) -> None:
    """The insert reaches DynamoDB, its answer is lost, botocore retries, the retry is refused:
    the store recognises its own write, so a versioned put makes exactly one version."""
    store = documents_on()
    versioned = VersionedStore(store)
    kind = f"k{uuid.uuid4().hex[:8]}"
    versioned.put(kind, "t", {"n": 1})
    lost = LostAnswer()
    store.client.meta.events.register("before-send.dynamodb.TransactWriteItems", lost)
    record = versioned.put(kind, "t", {"n": 2})
    assert lost.sent == 1
    assert record.version == 2
    assert [r.body for r in versioned.list_versions(kind, "t")] == [{"n": 1}, {"n": 2}]


def test_a_retried_update_is_applied_once(documents_on: Any) -> None:
    store = documents_on()
    coll = f"c{uuid.uuid4().hex[:8]}"
    store.insert(coll, {"_id": "counter", "n": 0})
    lost = LostAnswer()
    store.client.meta.events.register("before-send.dynamodb.TransactWriteItems", lost)
    assert store.update(coll, {"_id": "counter"}, {"$inc": {"n": 1}}) == 1
    assert lost.sent == 1
    assert store.find_one(coll, {"_id": "counter"})["n"] == 1


def test_throttling_is_retried(documents_on: Any) -> None:
    store = documents_on()
    coll = f"c{uuid.uuid4().hex[:8]}"
    throttle = Throttle(1)
    store.client.meta.events.register("before-send.dynamodb.TransactWriteItems", throttle)
    store.insert(coll, {"_id": "a"})
    assert throttle.refused == 1
    assert store.count(coll) == 1


def test_an_expired_document_frees_its_id_and_unique_values(documents_on: Any) -> None:
    store = documents_on()
    coll = f"c{uuid.uuid4().hex[:8]}"
    store.ensure_index(coll, ["expires_at"], ttl=0)
    store.ensure_index(coll, ["holder"], unique=True)
    store.insert(coll, {"_id": "lock", "holder": "a", "expires_at": time.time() + 0.5})
    with pytest.raises(DuplicateKeyError):
        store.insert(coll, {"_id": "other", "holder": "a"})
    time.sleep(0.6)
    store.insert(coll, {"_id": "lock", "holder": "b"})  # the expired one is cleared away
    store.insert(coll, {"_id": "other", "holder": "a"})
    assert sorted(d["holder"] for d in store.query(coll)) == ["a", "b"]


def test_indexes_cover_existing_documents(documents_on: Any) -> None:
    store = documents_on()
    coll = f"c{uuid.uuid4().hex[:8]}"
    for i in range(5):
        store.insert(coll, {"_id": f"d{i}", "g": i % 2, "n": i})
    store.ensure_index(coll, ["g", "n"])
    assert [d["n"] for d in store.query(coll, {"g": 1}, sort="-n")] == [3, 1]
    assert store.find_one(coll, {"g": 0}, sort="-n")["_id"] == "d4"
    store.update(coll, {"_id": "d4"}, {"$set": {"g": 1}})
    assert store.find_one(coll, {"g": 1}, sort="-n")["_id"] == "d4"
    assert store.find_one(coll, {"g": 0}, sort="-n")["_id"] == "d2"


def test_a_failed_unique_index_is_not_kept(documents_on: Any) -> None:
    store = documents_on()
    coll = f"c{uuid.uuid4().hex[:8]}"
    store.insert(coll, {"_id": "a", "k": 1})
    store.insert(coll, {"_id": "b", "k": 1})
    with pytest.raises(DuplicateKeyError):
        store.ensure_index(coll, ["k"], unique=True)
    store.insert(coll, {"_id": "c", "k": 1})  # no unique index was left behind
    store.delete(coll, {"_id": {"$in": ["b", "c"]}})
    store.ensure_index(coll, ["k"], unique=True)  # its stale locks do not block a retry
    with pytest.raises(DuplicateKeyError):
        store.insert(coll, {"_id": "d", "k": 1})


def test_key_encodings_keep_the_query_languages_order_and_types() -> None:
    assert equality_key(1) == equality_key(1.0) != equality_key("1") != equality_key(True)
    values = [None, False, True, -1e300, -2, -0.5, 0, 0.25, 3, 2**60, "", "a", "ab", "b"]
    keys = [sort_key(v) for v in values]
    assert keys == sorted(keys)

"""The ``firestore`` document store: the real client library against a fake Firestore over gRPC.

No Firestore emulator installs on these machines, so ``gcp_fakes.firestore`` serves the five
RPCs the store sends (BatchGetDocuments, RunQuery, BeginTransaction, Commit, Rollback), built
from the proto types the client library ships, with Firestore's value order, filter and
precondition semantics, and serializable transactions; the client connects to it through
``FIRESTORE_EMULATOR_HOST`` as it would to the official emulator. The document and versioned
conformance suites run unchanged against it.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator

import pytest
from gcp_fakes.testbed import PROJECT, FirestoreServer

from agent_env.stores.base import DuplicateKeyError, InvalidQuery
from agent_env.testing.store_conformance.document import DocumentStoreSuite
from agent_env.testing.store_conformance.versioned import VersionedStoreSuite
from agentenv_gcp_stores.faults import AccessDenied, MissingResource
from agentenv_gcp_stores.firestore import FirestoreDocumentStore


def _store(**settings: object) -> FirestoreDocumentStore:
    return _factory(**settings)()


def _factory(**settings: object) -> Callable[[], FirestoreDocumentStore]:
    """A picklable factory, so the conformance suite can build stores in spawned processes."""
    options: dict[str, object] = {"project": PROJECT, "prefix": "t_"}
    options.update(settings)
    return functools.partial(FirestoreDocumentStore, **options)  # type: ignore[arg-type]


class TestFirestoreDocumentStore(DocumentStoreSuite):
    @pytest.fixture
    def store(self, firestore_server: FirestoreServer) -> Iterator[FirestoreDocumentStore]:
        store = _store()
        yield store
        store.close()

    @pytest.fixture
    def store_factory(
        self, firestore_server: FirestoreServer
    ) -> Callable[[], FirestoreDocumentStore]:
        return _factory()


class TestVersionedOnFirestore(VersionedStoreSuite):
    @pytest.fixture
    def documents(self, firestore_server: FirestoreServer) -> Iterator[FirestoreDocumentStore]:
        store = _store(prefix="v_")
        yield store
        store.close()

    @pytest.fixture
    def documents_factory(
        self, firestore_server: FirestoreServer
    ) -> Callable[[], FirestoreDocumentStore]:
        return _factory(prefix="v_")


@pytest.fixture
def server(firestore_server: FirestoreServer) -> Iterator[FirestoreServer]:
    firestore_server.control(reset=True)
    yield firestore_server
    firestore_server.control(reset=True)


@pytest.fixture
def coll() -> str:
    return f"x_{uuid.uuid4().hex[:10]}"


def test_what_json_allows_and_firestore_does_not_round_trips(
    server: FirestoreServer, coll: str
) -> None:
    store = _store()
    odd = {
        "_id": "a/b/../c",
        "matrix": [[1, 2], [], [[3]]],
        "": "empty key",
        "~tilde": {"~": 1, "~[]": [2]},
        "__reserved__": {"__name__": "x"},
        "big": 2**63 - 1,
    }
    store.insert(coll, odd)
    assert store.find_one(coll, {"_id": "a/b/../c"}) == odd
    for doc_id in (".", "..", "__x__", "ünï/cødé", "x" * 2000, "%2F"):
        store.insert(coll, {"_id": doc_id, "v": doc_id})
        assert store.find_one(coll, {"_id": doc_id}) == {"_id": doc_id, "v": doc_id}
    assert store.count(coll) == 7
    with pytest.raises(InvalidQuery, match="64 bits"):
        store.insert(coll, {"too_big": 2**64})


def test_queries_that_need_a_composite_index_fall_back_to_python(
    server: FirestoreServer, coll: str
) -> None:
    from structlog.testing import capture_logs

    store = _store()
    for version in (1, 2, 3):
        store.insert(coll, {"id": "t", "version": version, "n": version % 2})
    store.insert(coll, {"id": "u", "version": 9})
    server.control(strict_indexes=True)
    with capture_logs() as logs:
        assert store.find_one(coll, {"id": "t"}, sort=[("version", -1)])["version"] == 3
    assert sorted(d["version"] for d in store.query(coll, {"id": "t", "version": {"$gt": 1}})) == [
        2,
        3,
    ]
    found = store.query(coll, {"n": 1, "version": {"$lt": 9}}, sort="-version")
    assert [d["version"] for d in found] == [3, 1]
    assert "needs a composite index" in logs[0]["event"]
    assert "create_composite" in logs[0]["detail"]


def test_missing_database_is_one_line_naming_it(server: FirestoreServer, coll: str) -> None:
    server.control(missing_database=f"projects/{PROJECT}/databases/nodb")
    store = _store(database="nodb")
    for call in (lambda: store.find_one(coll), lambda: store.insert(coll, {"a": 1})):
        with pytest.raises(MissingResource) as caught:
            call()
        message = str(caught.value)
        assert f"projects/{PROJECT}/databases/nodb does not exist" in message
        assert "gcloud firestore databases create --database='nodb'" in message
        assert "\n" not in message


def test_permission_denied_names_the_collection_and_action(
    server: FirestoreServer, coll: str
) -> None:
    server.control(forbidden_database=f"projects/{PROJECT}/databases/locked")
    store = _store(database="locked")
    with pytest.raises(AccessDenied) as caught:
        store.insert(coll, {"a": 1})
    message = str(caught.value)
    assert message.startswith(
        f"permission denied: cannot insert into Firestore collection t_{coll}"
    )
    with pytest.raises(AccessDenied, match="cannot read"):
        store.query(coll)


def test_transient_errors_and_contention_are_retried(server: FirestoreServer, coll: str) -> None:
    store = _store()
    store.insert(coll, {"_id": "c", "n": 0})
    server.control(fault={"method": "RunQuery", "code": "UNAVAILABLE", "times": 2})
    server.control(fault={"method": "Commit", "code": "ABORTED", "times": 2})
    server.control(fault={"method": "BeginTransaction", "code": "UNAVAILABLE", "times": 1})
    assert store.update(coll, {"n": 0}, {"$inc": {"n": 1}}) == 1
    assert store.find_one(coll, {"_id": "c"})["n"] == 1


def test_a_commit_whose_answer_is_lost_is_not_applied_twice(
    server: FirestoreServer, coll: str
) -> None:
    """The commit applies, then the call fails: the store reads its write id back instead of
    incrementing again, and an insert that landed is not reported as a duplicate."""
    store = _store()
    store.insert(coll, {"_id": "c", "n": 0})
    server.control(fault={"method": "Commit", "code": "UNAVAILABLE", "times": 1, "after": True})
    assert store.update(coll, {"_id": "c"}, {"$inc": {"n": 1}}) == 1
    assert store.find_one(coll, {"_id": "c"})["n"] == 1
    server.control(fault={"method": "Commit", "code": "UNAVAILABLE", "times": 1, "after": True})
    assert store.insert(coll, {"_id": "new", "v": 1}) == "new"
    with pytest.raises(DuplicateKeyError):
        store.insert(coll, {"_id": "new", "v": 2})
    calls = server.control()["calls"]
    assert calls["Commit"] >= 4


def test_expired_documents_are_deleted_when_met(server: FirestoreServer, coll: str) -> None:
    import time

    store = _store()
    store.ensure_index(coll, ["at"], ttl=10)
    store.ensure_index(coll, ["slot"], unique=True)
    store.insert(coll, {"_id": "old", "at": time.time() - 60, "slot": 1})
    assert store.query(coll) == []
    raw = _store(prefix="t_")
    raw._seen_indexes.clear()
    assert raw._get_by_id(coll, "old") == []  # deleted, not only hidden
    store.insert(coll, {"_id": "new", "at": time.time(), "slot": 1})  # its lock was released
    assert store.count(coll) == 1

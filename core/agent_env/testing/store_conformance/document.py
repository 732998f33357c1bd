"""Conformance suite for :class:`agent_env.stores.base.DocumentStore` backends.

Subclass :class:`DocumentStoreSuite` and provide a ``store`` fixture (and optionally
``store_factory``: a zero-argument callable opening another store on the same data, so races go
through separate connections/clients). See :mod:`agent_env.testing.store_conformance`.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from agent_env.stores.base import DocumentStore, DuplicateKeyError, InvalidQuery, InvalidUpdate
from agent_env.testing.store_conformance import run_in_processes, skip_unless_it_pickles

__all__ = ["DocumentStoreSuite"]


def _ids(docs: list[dict[str, Any]]) -> list[str]:
    return [d["_id"] for d in docs]


def _found(doc: dict[str, Any] | None) -> dict[str, Any]:
    """A document the test expects to exist: a missing one fails as such, not as a TypeError."""
    assert doc is not None, "the document is missing"
    return doc


class DocumentStoreSuite:
    """The behaviour every document store must have (see the DocumentStore docstring)."""

    #: Threads (and processes) racing in the concurrency tests.
    WRITERS: ClassVar[int] = 4

    @pytest.fixture
    def store_factory(self, store: DocumentStore) -> Callable[[], DocumentStore]:
        return lambda: store

    @pytest.fixture
    def coll(self) -> str:
        return f"conf_{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def people(self, store: DocumentStore, coll: str) -> str:
        rows: list[dict[str, Any]] = [
            {"_id": "ann", "name": "Ann", "age": 31, "team": {"name": "red", "size": 3}},
            {"_id": "bob", "name": "Bob", "age": 25, "team": {"name": "blue", "size": 5}},
            {"_id": "cid", "name": "Cid", "age": 40, "team": {"name": "red", "size": 3}},
            {"_id": "dee", "name": "Dee", "age": None, "tags": ["x"]},
            {"_id": "eve", "name": "Eve", "age": "31", "active": True},
        ]
        for row in rows:
            store.insert(coll, row)
        return coll

    # -- insert and find -------------------------------------------------------------------

    def test_insert_then_find_by_id(self, store: DocumentStore, coll: str) -> None:
        assert store.insert(coll, {"_id": "a", "n": 1}) == "a"
        assert store.find_one(coll, {"_id": "a"}) == {"_id": "a", "n": 1}

    def test_insert_generates_a_string_id(self, store: DocumentStore, coll: str) -> None:
        first, second = store.insert(coll, {"n": 1}), store.insert(coll, {"n": 1})
        assert isinstance(first, str) and first and first != second
        assert store.find_one(coll, {"_id": first}) == {"_id": first, "n": 1}

    def test_missing_document_and_empty_collection(self, store: DocumentStore, coll: str) -> None:
        assert store.find_one(coll, {"_id": "nope"}) is None
        assert store.query(coll) == []
        assert store.count(coll) == 0

    def test_documents_are_copies(self, store: DocumentStore, coll: str) -> None:
        original: dict[str, Any] = {"_id": "a", "items": [1], "sub": {"k": "v"}}
        store.insert(coll, original)
        original["items"].append(2)
        found = _found(store.find_one(coll, {"_id": "a"}))
        assert found == {"_id": "a", "items": [1], "sub": {"k": "v"}}
        found["sub"]["k"] = "changed"
        assert _found(store.find_one(coll, {"_id": "a"}))["sub"] == {"k": "v"}

    def test_json_values_round_trip(self, store: DocumentStore, coll: str) -> None:
        doc = {
            "_id": "j",
            "text": "héllo ✓ \"quoted\" 'single'",
            "int": -7,
            "big": 2**53,
            "float": 0.25,
            "yes": True,
            "no": False,
            "null": None,
            "list": [1, "two", None, {"three": 3}],
            "nested": {"a": {"b": {"c": []}}},
        }
        store.insert(coll, doc)
        assert store.find_one(coll, {"_id": "j"}) == doc

    def test_duplicate_id_is_refused(self, store: DocumentStore, coll: str) -> None:
        store.insert(coll, {"_id": "a", "v": 1})
        with pytest.raises(DuplicateKeyError):
            store.insert(coll, {"_id": "a", "v": 2})
        assert store.find_one(coll, {"_id": "a"}) == {"_id": "a", "v": 1}
        assert store.count(coll) == 1

    def test_collections_are_separate(self, store: DocumentStore, coll: str) -> None:
        store.insert(coll, {"_id": "a"})
        store.insert(coll + "_other", {"_id": "a"})
        assert store.count(coll) == 1
        store.delete(coll + "_other", {})

    # -- filters ---------------------------------------------------------------------------

    def test_equality_on_dotted_paths(self, store: DocumentStore, people: str) -> None:
        assert sorted(_ids(store.query(people, {"team.name": "red"}))) == ["ann", "cid"]
        assert _ids(store.query(people, {"team.name": "red", "age": 40})) == ["cid"]
        assert store.query(people, {"team.nothing": "red"}) == []

    def test_equality_never_crosses_types(self, store: DocumentStore, people: str) -> None:
        assert _ids(store.query(people, {"age": 31})) == ["ann"]
        assert _ids(store.query(people, {"age": "31"})) == ["eve"]
        assert _ids(store.query(people, {"active": True})) == ["eve"]
        assert store.query(people, {"active": 1}) == []

    def test_none_matches_null_and_missing(self, store: DocumentStore, people: str) -> None:
        assert _ids(store.query(people, {"age": None})) == ["dee"]
        assert sorted(_ids(store.query(people, {"tags": None}))) == ["ann", "bob", "cid", "eve"]

    def test_comparisons(self, store: DocumentStore, people: str) -> None:
        def ids(f: dict[str, Any]) -> list[str]:
            return sorted(_ids(store.query(people, f)))

        assert ids({"age": {"$gt": 30}}) == ["ann", "cid"]  # "31" is text: not compared
        assert ids({"age": {"$gte": 31}}) == ["ann", "cid"]
        assert ids({"age": {"$lt": 31}}) == ["bob"]
        assert ids({"age": {"$lte": 31}}) == ["ann", "bob"]
        assert ids({"age": {"$gt": 20, "$lt": 35}}) == ["ann", "bob"]
        assert ids({"name": {"$gte": "Bob", "$lt": "Dee"}}) == ["bob", "cid"]
        assert ids({"age": {"$gt": "3"}}) == ["eve"]
        assert ids({"_id": {"$gt": "cid"}}) == ["dee", "eve"]

    def test_not_equal_matches_missing(self, store: DocumentStore, people: str) -> None:
        assert sorted(_ids(store.query(people, {"team.name": {"$ne": "red"}}))) == [
            "bob",
            "dee",
            "eve",
        ]
        assert sorted(_ids(store.query(people, {"age": {"$ne": None}}))) == [
            "ann",
            "bob",
            "cid",
            "eve",
        ]

    def test_in(self, store: DocumentStore, people: str) -> None:
        found = sorted(_ids(store.query(people, {"age": {"$in": [25, 40, "31"]}})))
        assert found == ["bob", "cid", "eve"]
        assert store.query(people, {"age": {"$in": []}}) == []
        assert sorted(_ids(store.query(people, {"_id": {"$in": ["ann", "zed"]}}))) == ["ann"]

    def test_exists(self, store: DocumentStore, people: str) -> None:
        assert _ids(store.query(people, {"tags": {"$exists": True}})) == ["dee"]
        assert "dee" in _ids(store.query(people, {"age": {"$exists": True}}))  # null is present
        assert sorted(_ids(store.query(people, {"team": {"$exists": False}}))) == ["dee", "eve"]

    @pytest.mark.parametrize(
        "bad",
        [
            {"age": {"$regex": "x"}},
            {"age": {}},
            {"bad path!": 1},
            {"a..b": 1},
            {"age": {"$in": "notalist"}},
            {"age": {"$gt": None}},
            {"age": {"$exists": "yes"}},
            {"team": {"name": "red", "size": 3}},
            {"tags": ["x"]},
        ],
    )
    def test_invalid_filters_are_refused(
        self, store: DocumentStore, coll: str, bad: dict[str, Any]
    ) -> None:
        with pytest.raises(InvalidQuery):
            store.query(coll, bad)

    # -- sort, paging, count ---------------------------------------------------------------

    def test_sort_limit_offset(self, store: DocumentStore, coll: str) -> None:
        for i, (group, n) in enumerate([("b", 2), ("a", 3), ("b", 1), ("a", 1), ("c", 2)]):
            store.insert(coll, {"_id": f"d{i}", "g": group, "n": n})
        assert [d["n"] for d in store.query(coll, sort="n")][:2] == [1, 1]
        assert store.query(coll, sort="-n")[0]["n"] == 3
        pairs = [(d["g"], d["n"]) for d in store.query(coll, sort=[("g", 1), ("n", -1)])]
        assert pairs == [("a", 3), ("a", 1), ("b", 2), ("b", 1), ("c", 2)]
        page = store.query(coll, sort=[("g", 1), ("n", -1)], limit=2, offset=1)
        assert [(d["g"], d["n"]) for d in page] == [("a", 1), ("b", 2)]
        assert store.query(coll, sort="n", limit=0) == []
        assert len(store.query(coll, offset=4)) == 1
        assert _found(store.find_one(coll, {"g": "b"}, sort="-n"))["_id"] == "d0"

    def test_count(self, store: DocumentStore, people: str) -> None:
        assert store.count(people) == 5
        assert store.count(people, {"team.name": "red"}) == 2
        assert store.count(people, {"age": {"$gt": 100}}) == 0

    # -- update, replace, delete -----------------------------------------------------------

    def test_update_operators(self, store: DocumentStore, coll: str) -> None:
        store.insert(coll, {"_id": "a", "n": 1, "gone": "x", "list": [1]})
        changed = store.update(
            coll,
            {"_id": "a"},
            {
                "$set": {"status": "done", "deep.new.field": 7},
                "$unset": {"gone": True, "never.there": True},
                "$inc": {"n": 2, "fresh": 0.5},
                "$push": {"list": {"k": 2}, "made": "first"},
            },
        )
        assert changed == 1
        assert store.find_one(coll, {"_id": "a"}) == {
            "_id": "a",
            "n": 3,
            "status": "done",
            "deep": {"new": {"field": 7}},
            "fresh": 0.5,
            "list": [1, {"k": 2}],
            "made": ["first"],
        }

    def test_update_first_or_many(self, store: DocumentStore, coll: str) -> None:
        for i in range(3):
            store.insert(coll, {"_id": f"d{i}", "g": "x", "n": 0})
        assert store.update(coll, {"g": "x"}, {"$inc": {"n": 1}}) == 1
        assert sum(d["n"] for d in store.query(coll)) == 1
        assert store.update(coll, {"g": "x"}, {"$inc": {"n": 1}}, many=True) == 3
        assert sum(d["n"] for d in store.query(coll)) == 4
        assert store.update(coll, {"g": "nothing"}, {"$set": {"n": 9}}, many=True) == 0

    def test_update_refuses_bad_changes(self, store: DocumentStore, coll: str) -> None:
        store.insert(coll, {"_id": "a", "text": "t", "map": {}})
        for bad in ({"$set": {"_id": "b"}}, {"$rename": {"a": "b"}}, {}, {"$inc": {"n": "1"}}):
            with pytest.raises(InvalidQuery):
                store.update(coll, {"_id": "a"}, bad)
        with pytest.raises(InvalidUpdate):
            store.update(coll, {"_id": "a"}, {"$inc": {"text": 1}})
        with pytest.raises(InvalidUpdate):
            store.update(coll, {"_id": "a"}, {"$push": {"map": 1}})
        assert store.find_one(coll, {"_id": "a"}) == {"_id": "a", "text": "t", "map": {}}

    def test_replace_keeps_the_id(self, store: DocumentStore, coll: str) -> None:
        store.insert(coll, {"_id": "a", "old": True})
        assert store.replace(coll, {"_id": "a"}, {"new": 1}) is True
        assert store.find_one(coll, {"_id": "a"}) == {"_id": "a", "new": 1}
        assert store.replace(coll, {"_id": "zzz"}, {"new": 1}) is False
        assert store.count(coll) == 1

    def test_delete(self, store: DocumentStore, people: str) -> None:
        assert store.delete(people, {"team.name": "red"}) == 2
        assert store.delete(people, {"team.name": "red"}) == 0
        assert store.count(people) == 3
        assert store.delete(people, {}) == 3
        assert store.count(people) == 0

    # -- indexes ---------------------------------------------------------------------------

    def test_unique_index(self, store: DocumentStore, coll: str) -> None:
        store.ensure_index(coll, ["email"], unique=True)
        store.insert(coll, {"_id": "a", "email": "a@x"})
        with pytest.raises(DuplicateKeyError):
            store.insert(coll, {"_id": "b", "email": "a@x"})
        store.insert(coll, {"_id": "c"})  # documents without the field never collide
        store.insert(coll, {"_id": "d"})
        store.insert(coll, {"_id": "e", "email": "e@x"})
        with pytest.raises(DuplicateKeyError):
            store.update(coll, {"_id": "e"}, {"$set": {"email": "a@x"}})
        with pytest.raises(DuplicateKeyError):
            store.replace(coll, {"_id": "c"}, {"email": "a@x"})
        assert _found(store.find_one(coll, {"_id": "e"}))["email"] == "e@x"
        assert store.count(coll) == 4

    def test_compound_unique_index(self, store: DocumentStore, coll: str) -> None:
        store.ensure_index(coll, ["id", "version"], unique=True)
        store.insert(coll, {"id": "t", "version": 1})
        store.insert(coll, {"id": "t", "version": 2})
        store.insert(coll, {"id": "u", "version": 1})
        with pytest.raises(DuplicateKeyError):
            store.insert(coll, {"id": "t", "version": 2})
        assert _found(store.find_one(coll, {"id": "t"}, sort=[("version", -1)]))["version"] == 2

    def test_ensure_index_is_idempotent(self, store: DocumentStore, coll: str) -> None:
        first = store.ensure_index(coll, ["a", ("b", -1)])
        assert store.ensure_index(coll, ["a", ("b", -1)]) == first
        assert isinstance(first, str)
        store.insert(coll, {"a": 1, "b": 2})
        assert store.count(coll, {"a": 1}) == 1

    def test_unique_index_over_duplicates_is_refused(self, store: DocumentStore, coll: str) -> None:
        store.insert(coll, {"k": 1})
        store.insert(coll, {"k": 1})
        with pytest.raises(DuplicateKeyError):
            store.ensure_index(coll, ["k"], unique=True)

    def test_ttl_hides_expired_documents(self, store: DocumentStore, coll: str) -> None:
        store.ensure_index(coll, ["expires_at"], ttl=0)
        now = time.time()
        store.insert(coll, {"_id": "old", "expires_at": now - 60})
        store.insert(coll, {"_id": "new", "expires_at": now + 3600})
        store.insert(coll, {"_id": "forever"})
        assert sorted(_ids(store.query(coll))) == ["forever", "new"]
        assert store.count(coll) == 2
        assert store.find_one(coll, {"_id": "old"}) is None
        other = coll + "_ttl"
        store.ensure_index(other, ["created"], ttl=30)
        store.insert(other, {"_id": "stale", "created": now - 31})
        store.insert(other, {"_id": "fresh", "created": now})
        assert _ids(store.query(other)) == ["fresh"]
        store.delete(other, {})

    # -- concurrency -----------------------------------------------------------------------

    def test_concurrent_increments_lose_nothing(
        self, store: DocumentStore, store_factory: Callable[[], DocumentStore], coll: str
    ) -> None:
        store.insert(coll, {"_id": "counter", "n": 0})
        rounds = 25

        def work() -> None:
            mine = store_factory()
            for _ in range(rounds):
                mine.update(coll, {"_id": "counter"}, {"$inc": {"n": 1}, "$push": {"log": 1}})

        _run_threads(work, self.WRITERS)
        final = _found(store.find_one(coll, {"_id": "counter"}))
        assert final["n"] == rounds * self.WRITERS
        assert len(final["log"]) == rounds * self.WRITERS

    def test_concurrent_unique_inserts_have_one_winner(
        self, store: DocumentStore, store_factory: Callable[[], DocumentStore], coll: str
    ) -> None:
        store.ensure_index(coll, ["slot"], unique=True)
        wins: list[int] = []
        lock = threading.Lock()

        def work(i: int) -> None:
            mine = store_factory()
            for slot in range(10):
                try:
                    mine.insert(coll, {"slot": slot, "writer": i})
                except DuplicateKeyError:
                    continue
                with lock:
                    wins.append(slot)

        _run_threads(work, self.WRITERS, with_index=True)
        assert sorted(wins) == list(range(10))
        assert store.count(coll) == 10

    def test_concurrent_processes_write_everything(
        self, store: DocumentStore, store_factory: Callable[[], DocumentStore], coll: str
    ) -> None:
        skip_unless_it_pickles(store_factory)
        store.insert(coll, {"_id": "counter", "n": 0})
        per_process = 20
        work = functools.partial(_insert_and_count, store_factory, coll, per_process)
        run_in_processes(work, self.WRITERS)
        assert store.count(coll, {"writer": {"$exists": True}}) == per_process * self.WRITERS
        assert _found(store.find_one(coll, {"_id": "counter"}))["n"] == per_process * self.WRITERS


def _run_threads(work: Callable[..., None], count: int, *, with_index: bool = False) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        try:
            barrier.wait(30)
            work(i) if with_index else work()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if errors:
        raise errors[0]


def _insert_and_count(
    factory: Callable[[], DocumentStore], coll: str, count: int, index: int
) -> None:
    """One racing writer process: insert ``count`` documents, bumping the shared counter."""
    mine = factory()
    for j in range(count):
        mine.insert(coll, {"_id": f"p{index}-{j}", "writer": index})
        mine.update(coll, {"_id": "counter"}, {"$inc": {"n": 1}})

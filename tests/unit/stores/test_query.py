"""The query language: the Python reference semantics agree with the SQLite translation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_env.stores import query as q
from agent_env.stores.base import InvalidQuery, InvalidUpdate
from agent_env.stores.sqlite import SqliteDocumentStore

DOCS: list[dict[str, Any]] = [
    {"_id": "1", "a": 1, "s": "x", "b": True, "n": {"v": 1.5}},
    {"_id": "2", "a": 2, "s": "y", "b": False, "n": {"v": "1.5"}},
    {"_id": "3", "a": "1", "s": None, "l": [1, 2]},
    {"_id": "4", "a": None, "n": None},
    {"_id": "5", "s": "", "b": 1},
    {"_id": "6", "a": 1.0, "s": "x", "n": {"v": -3}},
]

FILTERS: list[dict[str, Any]] = [
    {},
    {"a": 1},
    {"a": "1"},
    {"a": None},
    {"a": {"$ne": 1}},
    {"a": {"$ne": None}},
    {"b": True},
    {"b": 1},
    {"b": {"$ne": True}},
    {"s": ""},
    {"s": {"$gt": ""}},
    {"s": {"$gte": "x", "$lt": "y"}},
    {"n.v": {"$lt": 2}},
    {"n.v": {"$gte": "1"}},
    {"n.v": {"$exists": True}},
    {"n": {"$exists": False}},
    {"l": {"$exists": True}},
    {"a": {"$in": [1, "1", None]}},
    {"a": {"$in": [True]}},
    {"_id": {"$in": ["1", "9"]}},
    {"_id": {"$gte": "4"}},
    {"_id": 1},
    {"a": 1, "s": "x"},
    {"a": {"$eq": 2}},
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SqliteDocumentStore:
    store = SqliteDocumentStore(tmp_path_factory.mktemp("q") / "d.sqlite3")
    for doc in DOCS:
        store.insert("docs", doc)
    return store


@pytest.mark.parametrize("filter", FILTERS, ids=repr)
def test_sqlite_agrees_with_the_reference(store: SqliteDocumentStore, filter: dict) -> None:
    expected = sorted(d["_id"] for d in DOCS if q.matches(d, filter))
    assert sorted(d["_id"] for d in store.query("docs", filter)) == expected
    assert store.count("docs", filter) == len(expected)


def test_sort_reference_puts_missing_first() -> None:
    ordered = q.sort_documents(DOCS, [("s", 1), ("_id", -1)])
    assert [d["_id"] for d in ordered] == ["4", "3", "5", "6", "1", "2"]


def test_apply_update_does_not_touch_its_input() -> None:
    doc = {"_id": "x", "l": [1], "m": {"k": 1}}
    new = q.apply_update(doc, {"$push": {"l": 2}, "$set": {"m.k": 2}, "$unset": {"zz.y": 1}})
    assert doc == {"_id": "x", "l": [1], "m": {"k": 1}}
    assert new == {"_id": "x", "l": [1, 2], "m": {"k": 2}}
    with pytest.raises(InvalidUpdate):
        q.apply_update({"m": 1}, {"$set": {"m.k": 1}})


@pytest.mark.parametrize(
    "bad",
    [{"a": {"$gt": True}}, {"a": {"$in": [[1]]}}, {"a": float("nan")}, {1: 1}, "a", {"$or": []}],
    ids=repr,
)
def test_invalid_filters(bad: Any) -> None:
    with pytest.raises(InvalidQuery):
        q.normalize_filter(bad)


def test_field_paths_cannot_inject_sql(tmp_path: Path) -> None:
    store = SqliteDocumentStore(tmp_path / "d.sqlite3")
    for path in ("a') OR 1=1 --", "a'", 'a"', "a b", "1a", "a.", ""):
        with pytest.raises(InvalidQuery):
            store.query("c", {path: 1})
        with pytest.raises(InvalidQuery):
            store.ensure_index("c", [path])
    for name in ("bad name", 'x"; DROP TABLE y; --', "", "a" * 101, "a/b"):
        with pytest.raises(InvalidQuery):
            store.count(name)


def test_documents_must_be_json(tmp_path: Path) -> None:
    store = SqliteDocumentStore(tmp_path / "d.sqlite3")
    for bad in ({"x": float("inf")}, {"x": object()}, {"_id": 5}, {1: "int key"}):
        with pytest.raises(InvalidQuery):
            store.insert("c", bad)
    assert store.count("c") == 0

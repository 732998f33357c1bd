"""Local stores: versioned get/put at 1 and 5,000 versions, and document queries at 10,000.

The backends a run uses by default (SQLite documents, in a fresh file here). Each figure is the
median of single operations. Ratios say how the cost grows with the data: the latest version
of an entity with 5,000 versions should cost what it costs with one (the ``(id, version)``
index), and an indexed query over 10,000 documents what it costs over 100.
"""

from __future__ import annotations

from pathlib import Path

from bench.bars import Bar
from bench.measure import Series, time_calls

BODY = {"name": "greeting", "files": {"a.txt": {"key": "sha256/" + "0" * 64, "mode": 420}}}
VERSIONS = 5000
DOCUMENTS = 10_000
_GET_ONE = "versioned get latest, 1 version"
_QUERY_SMALL = "document query, indexed filter+sort, 100 documents"
#: Cost must not grow with the data: the ``(id, version)`` index and the collection's indexes.
BARS = (
    Bar(f"versioned get latest, {VERSIONS:,} versions", at_most=2),
    Bar(f"versioned get v{VERSIONS // 2:,}, {VERSIONS:,} versions", at_most=2),
    Bar(f"versioned put next, {VERSIONS:,} versions", at_most=2),
    Bar(f"document query, indexed filter+sort, {DOCUMENTS:,} documents", at_most=3),
)


def _versioned(path: Path):
    from agent_env.stores.sqlite import SqliteDocumentStore
    from agent_env.stores.versioned import VersionedStore

    return VersionedStore(SqliteDocumentStore(path))


def versioned_series(workdir: Path, repeat: int, versions: int) -> list[Series]:
    store = _versioned(workdir / "versioned.sqlite")
    counter = iter(range(10**9))
    first_put = time_calls(
        lambda: store.put("tasks", f"one-{next(counter)}", {**BODY, "n": 0}), repeat=repeat)
    store.put("tasks", "single", BODY)
    for n in range(versions):
        store.put("tasks", "many", {**BODY, "n": n})
    get_one = time_calls(lambda: store.get("tasks", "single"), repeat=repeat)
    get_many = time_calls(lambda: store.get("tasks", "many"), repeat=repeat)
    exact_many = time_calls(lambda: store.get("tasks", "many", versions // 2), repeat=repeat)
    later = iter(range(10**9))
    put_many = time_calls(
        lambda: store.put("tasks", "many", {**BODY, "n": -next(later)}), repeat=repeat)
    unchanged = time_calls(
        lambda: store.put_if_changed("tasks", "single", BODY), repeat=repeat)
    store.documents.close()
    label = f"{versions:,} versions"
    return [
        Series(_GET_ONE, get_one),
        Series(f"versioned get latest, {label}", get_many, baseline=_GET_ONE),
        Series(f"versioned get v{versions // 2:,}, {label}", exact_many, baseline=_GET_ONE),
        Series("versioned put v1", first_put),
        Series(f"versioned put next, {label}", put_many, baseline="versioned put v1"),
        Series("versioned put_if_changed, unchanged", unchanged, baseline=_GET_ONE),
    ]


def _fill(documents, collection: str, count: int) -> None:
    documents.ensure_index(collection, ["kind", "score"])
    for i in range(count):
        documents.insert(collection, {"kind": f"k{i % 20}", "score": i, "owner": f"u{i % 997}",
                                      "payload": {"text": "x" * 64, "n": i}})


def query_series(workdir: Path, repeat: int, documents_count: int) -> list[Series]:
    from agent_env.stores.sqlite import SqliteDocumentStore

    documents = SqliteDocumentStore(workdir / "documents.sqlite")
    _fill(documents, "small", 100)
    _fill(documents, "large", documents_count)

    def indexed(collection: str) -> None:
        found = documents.query(collection, {"kind": "k3"}, sort=[("score", -1)], limit=10)
        assert len(found) == 5 if collection == "small" else len(found) == 10

    def unindexed() -> None:
        documents.query("large", {"owner": "u42"}, limit=10)

    small = time_calls(lambda: indexed("small"), repeat=repeat)
    large = time_calls(lambda: indexed("large"), repeat=repeat)
    scan = time_calls(unindexed, repeat=repeat)
    count = time_calls(lambda: documents.count("large", {"kind": "k3"}), repeat=repeat)
    documents.close()
    label = f"{documents_count:,} documents"
    return [
        Series(_QUERY_SMALL, small),
        Series(f"document query, indexed filter+sort, {label}", large, baseline=_QUERY_SMALL),
        Series(f"document query, unindexed filter, {label}", scan, baseline=_QUERY_SMALL,
               note="scans: for scale"),
        Series(f"document count, indexed filter, {label}", count, baseline=_QUERY_SMALL),
    ]


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    # Smoke keeps the data sizes (filling them takes seconds) so the bars' series exist.
    folder = workdir / "stores"
    folder.mkdir(parents=True, exist_ok=True)
    repeat = 1 if smoke else 100 if quick else 300
    return [*versioned_series(folder, repeat, VERSIONS),
            *query_series(folder, repeat, DOCUMENTS)]

"""Versioned entities on SQLite: the conformance suite, and "latest" as one index seek."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.stores.versioned import COLLECTION_PREFIX, VersionedStore
from agent_env.testing.store_conformance.versioned import VersionedStoreSuite


class TestVersionedOnSqlite(VersionedStoreSuite):
    @pytest.fixture
    def documents(self, tmp_path: Path) -> Iterator[SqliteDocumentStore]:
        store = SqliteDocumentStore(tmp_path / "docs.sqlite3")
        yield store
        store.close()

    @pytest.fixture
    def documents_factory(self, tmp_path: Path) -> Callable[[], SqliteDocumentStore]:
        return functools.partial(SqliteDocumentStore, tmp_path / "docs.sqlite3")


def _vm_steps(store: SqliteDocumentStore, call: Callable[[], object]) -> int:
    """SQLite virtual-machine instructions ``call`` runs: a deterministic measure of work."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = store._conn()
    conn.set_progress_handler(count, 1)
    try:
        call()
    finally:
        conn.set_progress_handler(None, 1)
    return steps


def test_latest_of_5000_versions_is_one_index_seek(tmp_path: Path) -> None:
    documents = SqliteDocumentStore(tmp_path / "docs.sqlite3", synchronous="OFF")
    versioned = VersionedStore(documents)
    versioned.put("tasks", "one", {"n": 1})
    versioned.put("tasks", "many", {"n": 1})
    collection = COLLECTION_PREFIX + "tasks"
    conn = documents._conn()
    with documents._write():  # 4,999 more versions of "many" in one transaction (fast setup)
        conn.executemany(
            'INSERT INTO "docs_entity_tasks" (id, data) VALUES (?, ?)',
            [
                (
                    f"many@v{v}",
                    json.dumps(
                        {
                            "_id": f"many@v{v}",
                            "body": {"n": v},
                            "content_hash": "sha256:x",
                            "created_at_utc": "2026-01-01T00:00:00+00:00",
                            "id": "many",
                            "kind": "tasks",
                            "reason": None,
                            "version": v,
                        }
                    ),
                )
                for v in range(2, 5001)
            ],
        )
    conn.execute("ANALYZE")
    assert versioned.get("tasks", "many").version == 5000
    assert versioned.latest_version("tasks", "many") == 5000

    plan = documents.explain(collection, {"id": "many"}, sort=[("version", -1)], limit=1)
    assert len(plan) == 1, plan
    assert plan[0].startswith("SEARCH docs_entity_tasks USING INDEX ux_entity_tasks__id__version")
    assert "TEMP B-TREE" not in plan[0]

    steps_one = _vm_steps(documents, lambda: versioned.get("tasks", "one"))
    steps_many = _vm_steps(documents, lambda: versioned.get("tasks", "many"))
    assert steps_many <= steps_one + 10, (steps_one, steps_many)
    documents.close()


def test_a_put_reads_the_latest_through_the_index(tmp_path: Path) -> None:
    documents = SqliteDocumentStore(tmp_path / "docs.sqlite3")
    VersionedStore(documents).put("envs", "e", {})
    plan = documents.explain("entity_envs", {"version": 1})
    assert "USING INDEX" in plan[0], plan  # list_ids: the (version, id) index

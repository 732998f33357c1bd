"""The SQLite document store against the document-store conformance suite."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_env.stores.sqlite import SqliteDocumentStore
from agent_env.testing.store_conformance.document import DocumentStoreSuite


class TestSqliteDocumentStore(DocumentStoreSuite):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqliteDocumentStore]:
        store = SqliteDocumentStore(tmp_path / "docs.sqlite3")
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[[], SqliteDocumentStore]:
        return functools.partial(SqliteDocumentStore, tmp_path / "docs.sqlite3")

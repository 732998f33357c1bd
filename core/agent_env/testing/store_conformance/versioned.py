"""Conformance suite for versioned entities on a document-store backend.

Versioned entities are built from the document store alone, so a document backend gets them by
passing this suite: subclass :class:`VersionedStoreSuite` and provide a ``documents`` fixture
(a :class:`DocumentStore`) and optionally ``documents_factory`` (another store on the same data).
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
import uuid
from collections.abc import Callable
from typing import ClassVar

import pytest

from agent_env.stores.base import DocumentStore
from agent_env.stores.versioned import (
    VersionConflict,
    VersionedRecord,
    VersionedStore,
    content_hash,
)
from agent_env.testing.store_conformance import run_in_processes, skip_unless_it_pickles

__all__ = ["VersionedStoreSuite"]


def _present(record: VersionedRecord | None) -> VersionedRecord:
    """The record a test just wrote, failing the test (not with AttributeError) when it is gone."""
    assert record is not None, "a version that was put is missing"
    return record


class VersionedStoreSuite:
    """Versions are latest + 1 from 1, immutable, and never lost to concurrent writers."""

    WRITERS: ClassVar[int] = 4
    PUTS_PER_WRITER: ClassVar[int] = 15

    @pytest.fixture
    def documents_factory(self, documents: DocumentStore) -> Callable[[], DocumentStore]:
        return lambda: documents

    @pytest.fixture
    def versioned(self, documents: DocumentStore) -> VersionedStore:
        return VersionedStore(documents)

    @pytest.fixture
    def kind(self) -> str:
        return f"conf{uuid.uuid4().hex[:10]}"

    def test_versions_start_at_one_and_increase(self, versioned: VersionedStore, kind: str) -> None:
        first = versioned.put(kind, "@local/b/hello", {"steps": [1]}, reason="new")
        second = versioned.put(kind, "@local/b/hello", {"steps": [1, 2]})
        assert isinstance(first, VersionedRecord)
        assert (first.version, second.version) == (1, 2)
        assert first.kind == kind and first.id == "@local/b/hello"
        assert first.reason == "new" and second.reason is None
        assert first.content_hash == content_hash({"steps": [1]})
        assert first.created_at_utc.tzinfo is not None
        assert abs(first.created_at_utc - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5)
        assert versioned.put(kind, "other", {}).version == 1
        assert versioned.latest_version(kind, "@local/b/hello") == 2
        assert versioned.latest_version(kind, "absent") == 0

    def test_get_latest_and_specific(self, versioned: VersionedStore, kind: str) -> None:
        for n in range(1, 4):
            versioned.put(kind, "t", {"n": n})
        latest = versioned.get(kind, "t")
        assert latest is not None and latest.version == 3 and latest.body == {"n": 3}
        assert _present(versioned.get(kind, "t", 2)).body == {"n": 2}
        assert versioned.get(kind, "t", 4) is None
        assert versioned.get(kind, "absent") is None
        assert versioned.get(kind, "t", 1) == versioned.list_versions(kind, "t")[0]

    def test_explicit_version_must_be_next(self, versioned: VersionedStore, kind: str) -> None:
        assert versioned.put(kind, "t", {"a": 1}, version=1).version == 1
        for wrong in (1, 3, 0):
            with pytest.raises(VersionConflict) as caught:
                versioned.put(kind, "t", {"a": 2}, version=wrong)
            assert caught.value.latest == 1
        assert versioned.put(kind, "t", {"a": 2}, version=2).version == 2
        assert [r.body for r in versioned.list_versions(kind, "t")] == [{"a": 1}, {"a": 2}]

    def test_records_are_immutable(self, versioned: VersionedStore, kind: str) -> None:
        record = versioned.put(kind, "t", {"nested": {"k": "v"}})
        with pytest.raises(AttributeError):
            record.version = 5  # type: ignore[misc]
        record.body["nested"]["k"] = "changed"
        assert _present(versioned.get(kind, "t", 1)).body == {"nested": {"k": "v"}}

    def test_list_versions_and_ids(self, versioned: VersionedStore, kind: str) -> None:
        for id in ("b", "a", "c", "a", "b", "a"):
            versioned.put(kind, id, {"id": id})
        assert [r.version for r in versioned.list_versions(kind, "a")] == [1, 2, 3]
        assert versioned.list_versions(kind, "zzz") == []
        assert versioned.list_ids(kind) == ["a", "b", "c"]
        assert versioned.list_ids(kind + "x") == []

    def test_kinds_are_separate(self, versioned: VersionedStore, kind: str) -> None:
        versioned.put(kind, "same-id", {"k": 1})
        assert versioned.put(kind + "b", "same-id", {"k": 2}).version == 1
        assert _present(versioned.get(kind, "same-id")).body == {"k": 1}

    def test_content_hash_and_put_if_changed(self, versioned: VersionedStore, kind: str) -> None:
        assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": [1, 2], "a": 1})
        first, created = versioned.put_if_changed(kind, "t", {"a": 1})
        assert created and first.version == 1
        again, created = versioned.put_if_changed(kind, "t", {"a": 1})
        assert not created and again == first
        changed, created = versioned.put_if_changed(kind, "t", {"a": 2}, reason="files changed")
        assert created and changed.version == 2 and changed.reason == "files changed"
        custom, created = versioned.put_if_changed(kind, "t", {"a": 2}, content_hash="sha256:ff")
        assert created and custom.version == 3 and custom.content_hash == "sha256:ff"

    def test_bad_input_is_refused(self, versioned: VersionedStore, kind: str) -> None:
        with pytest.raises(ValueError):
            versioned.put(kind, "", {})
        with pytest.raises(ValueError):
            versioned.put(kind, "t", ["not", "a", "mapping"])  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            versioned.put(kind, "t", {"x": float("nan")})
        assert versioned.get(kind, "t") is None

    def test_concurrent_writers_lose_no_version(
        self, documents_factory: Callable[[], DocumentStore], kind: str
    ) -> None:
        errors: list[BaseException] = []
        written: list[tuple[int, int, int]] = []
        lock = threading.Lock()
        barrier = threading.Barrier(self.WRITERS)

        def write(i: int) -> None:
            mine = VersionedStore(documents_factory())
            try:
                barrier.wait(30)
                for j in range(self.PUTS_PER_WRITER):
                    record = mine.put(kind, "shared", {"writer": i, "n": j})
                    with lock:
                        written.append((record.version, i, j))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(self.WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        total = self.WRITERS * self.PUTS_PER_WRITER
        store = VersionedStore(documents_factory())
        versions = store.list_versions(kind, "shared")
        assert [r.version for r in versions] == list(range(1, total + 1))
        assert sorted(v for v, _, _ in written) == list(range(1, total + 1))
        stored = {(r.body["writer"], r.body["n"]) for r in versions}
        assert stored == {(i, j) for _, i, j in written}

    def test_concurrent_processes_lose_no_version(
        self, documents_factory: Callable[[], DocumentStore], kind: str
    ) -> None:
        skip_unless_it_pickles(documents_factory)
        write = functools.partial(_put_versions, documents_factory, kind, self.PUTS_PER_WRITER)
        run_in_processes(write, self.WRITERS)
        total = self.WRITERS * self.PUTS_PER_WRITER
        versions = VersionedStore(documents_factory()).list_versions(kind, "shared")
        assert [r.version for r in versions] == list(range(1, total + 1))
        assert {(r.body["writer"], r.body["n"]) for r in versions} == {
            (i, j) for i in range(self.WRITERS) for j in range(self.PUTS_PER_WRITER)
        }

    def test_concurrent_identical_content_makes_one_version(
        self, documents_factory: Callable[[], DocumentStore], kind: str
    ) -> None:
        barrier = threading.Barrier(self.WRITERS)
        created: list[bool] = []

        def write() -> None:
            mine = VersionedStore(documents_factory())
            barrier.wait(30)
            created.append(mine.put_if_changed(kind, "t", {"same": True})[1])

        threads = [threading.Thread(target=write) for _ in range(self.WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert created.count(True) == 1
        assert VersionedStore(documents_factory()).latest_version(kind, "t") == 1


def _put_versions(factory: Callable[[], DocumentStore], kind: str, count: int, index: int) -> None:
    """One racing writer process: put ``count`` versions of the shared record."""
    mine = VersionedStore(factory())
    for j in range(count):
        mine.put(kind, "shared", {"writer": index, "n": j})

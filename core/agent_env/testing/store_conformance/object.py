"""Conformance suite for :class:`agent_env.stores.base.ObjectStore` backends.

Subclass :class:`ObjectStoreSuite` and provide a ``store`` fixture (and optionally
``store_factory``). Every test works under its own random ``prefix``. Signed URLs are fetched
with ``urllib`` (``file://``, ``http://`` and ``https://`` all work), so a cloud backend's test
needs its endpoint reachable from the test process (moto, a GCS emulator).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import io
import threading
import urllib.request
import uuid
from collections.abc import Callable
from typing import ClassVar

import pytest

from agent_env.stores.base import (
    InvalidObjectKey,
    ObjectExists,
    ObjectMeta,
    ObjectNotFound,
    ObjectStore,
    UnsupportedOperation,
)
from agent_env.testing.store_conformance import run_in_processes, skip_unless_it_pickles

__all__ = ["BAD_KEYS", "ObjectStoreSuite"]

#: Keys every backend refuses with InvalidObjectKey (they escape folders or are ambiguous).
BAD_KEYS = [
    "",
    "/abs",
    "a//b",
    "a/",
    "a/../b",
    "..",
    "./a",
    "a/.",
    "a\\b",
    "a\nb",
    "x" * 1025,
]


class ObjectStoreSuite:
    """The behaviour every object store must have (see the ObjectStore docstring)."""

    WRITERS: ClassVar[int] = 4

    @pytest.fixture
    def store_factory(self, store: ObjectStore) -> Callable[[], ObjectStore]:
        return lambda: store

    @pytest.fixture
    def prefix(self) -> str:
        return f"conformance/{uuid.uuid4().hex[:12]}/"

    # -- put and get -----------------------------------------------------------------------

    def test_put_then_get(self, store: ObjectStore, prefix: str) -> None:
        data = b"hello \x00\xff world"
        meta = store.put(prefix + "a.bin", data)
        assert isinstance(meta, ObjectMeta)
        assert meta.key == prefix + "a.bin"
        assert meta.size == len(data)
        assert meta.content_type == "application/octet-stream"
        assert meta.sha256 in (None, hashlib.sha256(data).hexdigest())
        assert meta.updated.tzinfo is not None
        assert store.get(prefix + "a.bin") == data

    def test_metadata(self, store: ObjectStore, prefix: str) -> None:
        before = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        store.put(prefix + "page.html", b"<p>hi</p>", content_type="text/html")
        meta = store.metadata(prefix + "page.html")
        assert meta.key == prefix + "page.html"
        assert meta.size == 9
        assert meta.content_type == "text/html"
        assert meta.etag
        assert meta.sha256 in (None, hashlib.sha256(b"<p>hi</p>").hexdigest())
        assert before <= meta.updated <= dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)

    def test_put_from_stream_and_empty(self, store: ObjectStore, prefix: str) -> None:
        big = bytes(range(256)) * 12_289  # a little over 3 MiB: several chunks
        meta = store.put(prefix + "big", io.BytesIO(big))
        assert meta.size == len(big)
        assert store.get(prefix + "big") == big
        assert store.put(prefix + "empty", b"").size == 0
        assert store.get(prefix + "empty") == b""

    def test_open_streams(self, store: ObjectStore, prefix: str) -> None:
        store.put(prefix + "s", b"abcdef")
        with store.open(prefix + "s") as stream:
            assert stream.read(2) == b"ab"
            assert stream.read() == b"cdef"

    def test_unusual_but_valid_keys(self, store: ObjectStore, prefix: str) -> None:
        for name in ("with space.txt", "ünïcødé ✓", "100%25 sure", "a%o", ".hidden", "x..y"):
            store.put(prefix + name, name.encode())
            assert store.get(prefix + name) == name.encode()
        assert len(store.list(prefix)) == 6

    # -- write-once and overwrite ----------------------------------------------------------

    def test_write_once(self, store: ObjectStore, prefix: str) -> None:
        store.put(prefix + "k", b"first")
        with pytest.raises(ObjectExists) as caught:
            store.put(prefix + "k", b"second")
        assert isinstance(caught.value, FileExistsError)
        assert prefix + "k" in str(caught.value)
        assert store.get(prefix + "k") == b"first"

    def test_overwrite_when_allowed(self, store: ObjectStore, prefix: str) -> None:
        first = store.put(prefix + "k", b"first", content_type="text/plain")
        second = store.put(prefix + "k", b"second!", allow_overwrite=True)
        assert store.get(prefix + "k") == b"second!"
        assert second.etag != first.etag
        meta = store.metadata(prefix + "k")
        assert meta.size == 7 and meta.etag == second.etag
        assert store.put(prefix + "new", b"x", allow_overwrite=True).size == 1

    # -- missing objects -------------------------------------------------------------------

    def test_missing_object(self, store: ObjectStore, prefix: str) -> None:
        key = prefix + "missing"
        for call in (store.get, store.open, store.metadata):
            with pytest.raises(ObjectNotFound) as caught:
                call(key)
            assert isinstance(caught.value, FileNotFoundError)
            assert key in str(caught.value)
        assert store.exists(key) is False

    def test_exists_and_delete(self, store: ObjectStore, prefix: str) -> None:
        store.put(prefix + "d", b"x")
        assert store.exists(prefix + "d") is True
        assert store.delete(prefix + "d") is True
        assert store.exists(prefix + "d") is False
        assert store.delete(prefix + "d") is False
        with pytest.raises(ObjectNotFound):
            store.get(prefix + "d")
        store.put(prefix + "d", b"again")  # a deleted key can be written again
        assert store.get(prefix + "d") == b"again"

    # -- listing ---------------------------------------------------------------------------

    def test_list_is_a_sorted_string_prefix(self, store: ObjectStore, prefix: str) -> None:
        for key in ("b/2", "a", "a/1", "ab", "b/1", "c/d/e"):
            store.put(prefix + key, b"x")
        everything = [prefix + k for k in ("a", "a/1", "ab", "b/1", "b/2", "c/d/e")]
        assert store.list(prefix) == everything
        assert store.list(prefix + "a") == [prefix + "a", prefix + "a/1", prefix + "ab"]
        assert store.list(prefix + "a/") == [prefix + "a/1"]
        assert store.list(prefix + "c/d") == [prefix + "c/d/e"]
        assert store.list(prefix + "zzz") == []
        assert set(everything) <= set(store.list(""))

    def test_key_and_key_slash_child_are_independent(self, store: ObjectStore, prefix: str) -> None:
        store.put(prefix + "a/b", b"child")
        store.put(prefix + "a", b"parent")
        assert store.get(prefix + "a") == b"parent"
        assert store.get(prefix + "a/b") == b"child"
        store.delete(prefix + "a")
        assert store.get(prefix + "a/b") == b"child"

    # -- keys ------------------------------------------------------------------------------

    @pytest.mark.parametrize("bad", BAD_KEYS, ids=repr)
    def test_bad_keys_are_refused(self, store: ObjectStore, prefix: str, bad: str) -> None:
        key = bad if bad.startswith("/") or bad == "" else prefix + bad
        calls: list[Callable[[], object]] = [
            lambda: store.put(key, b"x"),
            lambda: store.get(key),
            lambda: store.open(key),
            lambda: store.exists(key),
            lambda: store.metadata(key),
            lambda: store.delete(key),
            lambda: store.signed_get_url(key),
        ]
        for call in calls:
            with pytest.raises(InvalidObjectKey):
                call()
        assert store.list(prefix) == []

    # -- URLs ------------------------------------------------------------------------------

    def test_signed_get_url(self, store: ObjectStore, prefix: str) -> None:
        store.put(prefix + "u.txt", b"via url", content_type="text/plain")
        try:
            url = store.signed_get_url(prefix + "u.txt", expires_in=600)
        except UnsupportedOperation:
            pytest.skip("this backend hands out no download URLs")
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.read() == b"via url"
        with pytest.raises(ObjectNotFound):
            store.signed_get_url(prefix + "absent")

    def test_signed_put_url(self, store: ObjectStore, prefix: str) -> None:
        try:
            url = store.signed_put_url(prefix + "up.txt", expires_in=600)
        except UnsupportedOperation as exc:
            assert str(exc)  # it must say what to do instead
            return
        assert url.startswith(("http://", "https://"))
        # an uploader names the type; urllib's default (a form) is parsed away by some servers
        request = urllib.request.Request(
            url,
            data=b"uploaded",
            method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass
        assert store.get(prefix + "up.txt") == b"uploaded"

    # -- concurrency -----------------------------------------------------------------------

    def test_write_once_race_has_exactly_one_winner(
        self, store: ObjectStore, store_factory: Callable[[], ObjectStore], prefix: str
    ) -> None:
        key = prefix + "race"
        winners: list[int] = []
        losers: list[int] = []
        lock = threading.Lock()
        barrier = threading.Barrier(self.WRITERS)
        errors: list[BaseException] = []

        def write(i: int) -> None:
            mine = store_factory()
            try:
                barrier.wait(30)
                mine.put(key, f"writer {i}".encode() * 1000)
                with lock:
                    winners.append(i)
            except ObjectExists:
                with lock:
                    losers.append(i)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(self.WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        assert len(winners) == 1 and len(losers) == self.WRITERS - 1
        assert store.get(key) == f"writer {winners[0]}".encode() * 1000

    def test_write_once_race_between_processes(
        self, store: ObjectStore, store_factory: Callable[[], ObjectStore], prefix: str
    ) -> None:
        skip_unless_it_pickles(store_factory)
        key = prefix + "race"
        run_in_processes(functools.partial(_put_once, store_factory, key, prefix), self.WRITERS)
        assert len(store.list(prefix + "won/")) == 1
        assert len(store.list(prefix + "lost/")) == self.WRITERS - 1

    def test_readers_never_see_a_partial_overwrite(
        self, store: ObjectStore, store_factory: Callable[[], ObjectStore], prefix: str
    ) -> None:
        key = prefix + "swap"
        versions = [bytes([65 + i]) * 256_000 for i in range(3)]
        store.put(key, versions[0])
        stop = threading.Event()
        seen: list[bytes] = []

        def read() -> None:
            mine = store_factory()
            while not stop.is_set():
                seen.append(mine.get(key))

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for round_ in range(10):
                store.put(key, versions[round_ % 3], allow_overwrite=True)
        finally:
            stop.set()
            reader.join(30)
        assert seen and all(data in versions for data in seen)


def _put_once(factory: Callable[[], ObjectStore], key: str, prefix: str, index: int) -> None:
    """One racing writer: put ``key`` once, then record whether this process won."""
    mine = factory()
    try:
        mine.put(key, b"payload")
    except ObjectExists:
        mine.put(f"{prefix}lost/{index}", b"")
    else:
        mine.put(f"{prefix}won/{index}", b"")

"""The filesystem object store against the object-store conformance suite, plus its disk layout."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_env.stores.base import InvalidObjectKey, UnsupportedOperation
from agent_env.stores.filesystem import FilesystemObjectStore
from agent_env.testing.store_conformance.object import ObjectStoreSuite


class TestFilesystemObjectStore(ObjectStoreSuite):
    @pytest.fixture
    def store(self, tmp_path: Path) -> FilesystemObjectStore:
        return FilesystemObjectStore(tmp_path / "objects")

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[[], FilesystemObjectStore]:
        return functools.partial(FilesystemObjectStore, tmp_path / "objects")


def test_nothing_is_written_outside_the_root(tmp_path: Path) -> None:
    store = FilesystemObjectStore(tmp_path / "objects")
    for bad in ("../escape", "a/../../escape", "/tmp/escape", "..\\escape"):
        with pytest.raises(InvalidObjectKey):
            store.put(bad, b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["objects"]


def test_a_symlinked_folder_out_of_the_root_is_refused(tmp_path: Path) -> None:
    store = FilesystemObjectStore(tmp_path / "objects")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "objects" / "link").symlink_to(outside)
    with pytest.raises(InvalidObjectKey, match="outside"):
        store.put("link/x", b"x")
    assert list(outside.iterdir()) == []


def test_layout_is_private_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = FilesystemObjectStore(tmp_path / "objects")
    store.put("runs/r1/out.txt", b"x", content_type="text/plain")
    store.put("runs/r1/out.txt", b"y", allow_overwrite=True)
    root = tmp_path / "objects"
    assert os.stat(root).st_mode & 0o077 == 0
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert names == ["runs/r1/out.txt%m", "runs/r1/out.txt%o"]


def test_metadata_without_a_sidecar_is_computed_from_the_data(tmp_path: Path) -> None:
    store = FilesystemObjectStore(tmp_path / "objects")
    written = store.put("k", b"data", content_type="text/plain")
    (tmp_path / "objects" / "k%m").unlink()
    meta = store.metadata("k")
    assert (meta.size, meta.sha256, meta.etag) == (4, written.sha256, written.etag)
    assert meta.content_type == "application/octet-stream"


def test_signed_urls(tmp_path: Path) -> None:
    store = FilesystemObjectStore(tmp_path / "objects")
    store.put("a b/c", b"x")
    assert store.signed_get_url("a b/c").startswith("file:///")
    with pytest.raises(UnsupportedOperation, match="put"):
        store.signed_put_url("a b/d")

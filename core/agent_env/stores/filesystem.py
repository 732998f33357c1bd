"""The local object store: one file per object under a folder, written atomically.

On disk, key ``a/b/c.txt`` is the file ``<root>/a/b/c.txt%o`` with a JSON sidecar
``c.txt%m`` (content type, sha256, time). Folder segments have ``%`` escaped as ``%25`` and
object files end in ``%o``, so the keys ``a`` and ``a/b`` never collide on disk (S3 allows both),
and temporary files (``.<pid>.<start>-<random>%t``) can never be mistaken for an object.
A temporary file names its writer process, so ``agent-env gc`` can remove the ones a writer
killed mid-write left (:meth:`FilesystemObjectStore.stale_temporary_files`); any other ending
(an exception, Ctrl-C, SIGTERM) removes its own.

A write streams to a temporary file in the destination folder, fsyncs it, then publishes it
with ``os.link`` (fails if the key exists: write-once, exactly one racing writer wins) or
``os.replace`` (overwrite). Readers therefore see a whole object or none. The sidecar records
the data file's inode; if a concurrent overwrite leaves a sidecar that belongs to another
version, :meth:`metadata` notices and recomputes from the data itself.

``signed_get_url`` returns a ``file://`` URL (it only works on this machine, and never expires);
``signed_put_url`` raises :class:`UnsupportedOperation`, since an upload URL would bypass
write-once: callers upload with :meth:`put`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from agent_env.stores.base import (
    InvalidObjectKey,
    ObjectExists,
    ObjectMeta,
    ObjectNotFound,
    ObjectStore,
    UnsupportedOperation,
    validate_key,
    validate_prefix,
)

DEFAULT_CONTENT_TYPE = "application/octet-stream"
_DATA, _META, _TEMP = "%o", "%m", "%t"
_CHUNK = 1 << 20


#: A temporary file of no known writer is stale once this old (seconds).
STALE_UNKNOWN_SECONDS = 3600.0


def _writer_prefix() -> str:
    """``.<pid>.<start>-``: this process, and its start time so a reused pid is told apart."""
    from agent_env.sandbox.ownership import process_start

    pid = os.getpid()
    return f".{pid}.{process_start(pid)}-"


def _writer_gone(name: str, mtime: float) -> bool:
    """Whether the process a temporary file's name records is gone (or, for a name that
    records none, whether the file is older than ``STALE_UNKNOWN_SECONDS``)."""
    import time

    from agent_env.sandbox.ownership import process_start

    head = name[1:].split("-", 1)[0].split(".")
    try:
        pid, start = int(head[0]), int(head[1])
    except (IndexError, ValueError):
        return time.time() - mtime > STALE_UNKNOWN_SECONDS
    now = process_start(pid)
    return now is None or (start >= 0 and now >= 0 and now != start)


def _encode(segment: str) -> str:
    return segment.replace("%", "%25")


def _decode(name: str) -> str:
    return name.replace("%25", "%")


class FilesystemObjectStore(ObjectStore):
    """:class:`ObjectStore` in a local folder (created 0700)."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.root = Path(path).expanduser()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.root = self.root.resolve()
        self.fsync = fsync

    def stale_temporary_files(self) -> list[Path]:
        """Temporary files whose writer is gone (killed mid-write, so nothing removed them)."""
        found = []
        for path in self.root.rglob(f".*{_TEMP}"):
            with contextlib.suppress(OSError):
                if path.is_file() and _writer_gone(path.name, path.stat().st_mtime):
                    found.append(path)
        return sorted(found)

    # -- paths -----------------------------------------------------------------------------

    def _paths(self, key: str) -> tuple[Path, Path]:
        """(data file, sidecar) for a validated key, refusing anything that resolves outside."""
        validate_key(key)
        *folders, last = key.split("/")
        name = _encode(last)
        if len((name + _DATA).encode()) > 255 or any(
            len(_encode(f).encode()) > 255 for f in folders
        ):
            raise InvalidObjectKey(
                f"invalid object key {key!r}: a segment is too long for a file name"
            )
        folder = self.root.joinpath(*(_encode(f) for f in folders))
        real = os.path.realpath(folder)
        if real != str(self.root) and not real.startswith(str(self.root) + os.sep):
            raise InvalidObjectKey(f"invalid object key {key!r}: it resolves outside the store")
        return folder / (name + _DATA), folder / (name + _META)

    def _key_of(self, path: Path) -> str:
        relative = path.relative_to(self.root)
        *folders, last = relative.parts
        return "/".join([*(_decode(f) for f in folders), _decode(last[: -len(_DATA)])])

    # -- writes ----------------------------------------------------------------------------

    def put(
        self,
        key: str,
        data: bytes | bytearray | memoryview | BinaryIO,
        content_type: str | None = None,
        allow_overwrite: bool = False,
    ) -> ObjectMeta:
        final, sidecar = self._paths(key)
        if not allow_overwrite and final.exists():
            raise ObjectExists(key)  # cheap early answer; the link below is what guarantees it
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temps: list[str] = []
        try:
            tmp, size, digest, inode = self._write_temp(final.parent, data)
            temps.append(tmp)
            meta = ObjectMeta(
                key=key,
                size=size,
                content_type=content_type or DEFAULT_CONTENT_TYPE,
                etag=digest,
                sha256=digest,
                updated=dt.datetime.now(dt.UTC),
            )
            record = {
                "content_type": meta.content_type,
                "sha256": digest,
                "size": size,
                "inode": inode,
                "updated": meta.updated.isoformat(),
            }
            meta_tmp, *_ = self._write_temp(final.parent, json.dumps(record).encode())
            temps.append(meta_tmp)
            if allow_overwrite:
                os.replace(tmp, final)
            else:
                try:
                    os.link(tmp, final)
                except FileExistsError:
                    raise ObjectExists(key) from None
            os.replace(meta_tmp, sidecar)
            if self.fsync:
                self._fsync_dir(final.parent)
            return meta
        finally:
            for path in temps:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def _write_temp(
        self, folder: Path, data: bytes | bytearray | memoryview | BinaryIO
    ) -> tuple[str, int, str, int]:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=_writer_prefix(), suffix=_TEMP)
        digest = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                chunks: Iterable[bytes]
                if isinstance(data, bytes | bytearray | memoryview):
                    chunks = [bytes(data)]
                elif hasattr(data, "read"):
                    chunks = iter(lambda: data.read(_CHUNK), b"")
                else:
                    raise TypeError(
                        f"put() takes bytes or a binary stream, not {type(data).__name__}"
                    )
                for chunk in chunks:
                    if not isinstance(chunk, bytes | bytearray | memoryview):
                        raise TypeError("put() needs a binary stream (it read text)")
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                out.flush()
                if self.fsync:
                    os.fsync(out.fileno())
                inode = os.fstat(out.fileno()).st_ino
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return tmp, size, digest.hexdigest(), inode

    @staticmethod
    def _fsync_dir(folder: Path) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self, key: str) -> bool:
        final, sidecar = self._paths(key)
        try:
            os.unlink(final)
        except FileNotFoundError:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sidecar)
        return True

    # -- reads -----------------------------------------------------------------------------

    def open(self, key: str) -> BinaryIO:
        final, _ = self._paths(key)
        try:
            return open(final, "rb")
        except FileNotFoundError:
            raise ObjectNotFound(key) from None

    def get(self, key: str) -> bytes:
        with self.open(key) as stream:
            return stream.read()

    def exists(self, key: str) -> bool:
        final, _ = self._paths(key)
        return final.is_file()

    def metadata(self, key: str) -> ObjectMeta:
        final, sidecar = self._paths(key)
        try:
            stat = final.stat()
        except FileNotFoundError:
            raise ObjectNotFound(key) from None
        try:
            record = json.loads(sidecar.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            record = {}
        if record.get("inode") == stat.st_ino and record.get("size") == stat.st_size:
            return ObjectMeta(
                key=key,
                size=stat.st_size,
                content_type=record["content_type"],
                etag=record["sha256"],
                sha256=record["sha256"],
                updated=dt.datetime.fromisoformat(record["updated"]),
            )
        # No sidecar (yet), or one from another version: describe the data itself.
        digest = hashlib.sha256()
        with self.open(key) as stream:
            for chunk in iter(lambda: stream.read(_CHUNK), b""):
                digest.update(chunk)
        return ObjectMeta(
            key=key,
            size=stat.st_size,
            content_type=DEFAULT_CONTENT_TYPE,
            etag=digest.hexdigest(),
            sha256=digest.hexdigest(),
            updated=dt.datetime.fromtimestamp(stat.st_mtime, dt.UTC),
        )

    def list(self, prefix: str = "") -> list[str]:
        validate_prefix(prefix)
        folders = prefix.split("/")[:-1]  # only descend into folders the prefix fully names
        start = self.root.joinpath(*(_encode(f) for f in folders))
        keys: list[str] = []
        for folder, _dirs, files in os.walk(start):
            for name in files:
                if name.endswith(_DATA):
                    key = self._key_of(Path(folder) / name)
                    if key.startswith(prefix):
                        keys.append(key)
        return sorted(keys)

    # -- URLs ------------------------------------------------------------------------------

    def signed_get_url(self, key: str, *, expires_in: int = 3600) -> str:
        final, _ = self._paths(key)
        if not final.is_file():
            raise ObjectNotFound(key)
        return final.as_uri()

    def signed_put_url(
        self, key: str, *, expires_in: int = 3600, content_type: str | None = None
    ) -> str:
        validate_key(key)
        raise UnsupportedOperation(
            "the filesystem object store cannot hand out upload URLs (they would bypass "
            "write-once); upload with put(), or configure an object store such as 's3'"
        )

"""A build context as ``docker build`` would send it, and the digest that names its image.

The digest covers exactly what the engine receives: ``.dockerignore`` honoured (with the SDK's
own matcher, so we agree with ``docker build``), paths sorted, modes normalised to 0644/0755 and
owners and times dropped, so a checkout on another machine or a ``touch`` gives the same digest.
The tar we send is written from the same entry list, with the same normalisation, so what is
hashed is what is built.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

import attrs

from agent_env.errors import UserError

FILE, DIRECTORY, SYMLINK = "file", "dir", "symlink"


@attrs.frozen
class ContextEntry:
    """One path of the context: ``path`` is relative and POSIX-style."""

    path: str
    kind: str
    mode: int
    source: Path = attrs.field(eq=False, repr=False)


def read_dockerignore(root: Path) -> list[str]:
    """The patterns of ``root/.dockerignore`` (comments and blanks dropped), as the SDK reads."""
    path = root / ".dockerignore"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def context_entries(root: str | Path, *, dockerfile: str = "Dockerfile") -> list[ContextEntry]:
    """Every path ``docker build`` would send from ``root``, sorted."""
    from docker.utils.build import exclude_paths

    root = Path(root).resolve()
    if not root.is_dir():
        raise UserError(f"build context {root} is not a folder")
    if not (root / dockerfile).is_file():
        raise UserError(f"build context {root} has no {dockerfile}")
    entries = []
    for relative in sorted(exclude_paths(str(root), read_dockerignore(root), dockerfile)):
        source = root / relative
        info = source.lstat()
        if stat.S_ISLNK(info.st_mode):
            entries.append(ContextEntry(relative, SYMLINK, 0o777, source))
        elif stat.S_ISDIR(info.st_mode):
            entries.append(ContextEntry(relative, DIRECTORY, 0o755, source))
        elif stat.S_ISREG(info.st_mode):
            mode = 0o755 if info.st_mode & 0o111 else 0o644
            entries.append(ContextEntry(relative, FILE, mode, source))
        # sockets, fifos and devices are not sent by docker build either
    return entries


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def context_digest(entries: Iterable[ContextEntry]) -> str:
    """A sha256 hex digest of paths, kinds, normalised modes and contents."""
    digest = hashlib.sha256(b"agentenv-context-v1\0")
    for entry in sorted(entries, key=lambda e: e.path):
        if entry.kind == FILE:
            content = _file_sha256(entry.source)
        elif entry.kind == SYMLINK:
            content = os.readlink(entry.source)
        else:
            content = ""
        digest.update(f"{entry.kind}\0{entry.path}\0{entry.mode:o}\0{content}\n".encode())
    return digest.hexdigest()


def _tar_info(name: str, kind: str, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime, info.uid, info.gid = mode, 0, 0, 0
    info.uname = info.gname = ""
    info.type = {FILE: tarfile.REGTYPE, DIRECTORY: tarfile.DIRTYPE, SYMLINK: tarfile.SYMTYPE}[kind]
    info.size = size
    return info


def write_context_tar(
    entries: Iterable[ContextEntry],
    fileobj: IO[bytes],
    *,
    replace: Mapping[str, bytes] | None = None,
    extra: Mapping[str, bytes] | None = None,
) -> None:
    """Write the context as an uncompressed tar; ``replace``/``extra`` swap in or add files."""
    import io

    replace = dict(replace or {})
    with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            if entry.path in replace:
                data = replace.pop(entry.path)
                tar.addfile(_tar_info(entry.path, FILE, entry.mode, len(data)), io.BytesIO(data))
            elif entry.kind == FILE:
                info = _tar_info(entry.path, FILE, entry.mode, entry.source.stat().st_size)
                with entry.source.open("rb") as handle:
                    tar.addfile(info, handle)
            elif entry.kind == SYMLINK:
                info = _tar_info(entry.path, SYMLINK, entry.mode)
                info.linkname = os.readlink(entry.source)
                tar.addfile(info)
            else:
                tar.addfile(_tar_info(entry.path, DIRECTORY, entry.mode))
        for name, data in {**replace, **dict(extra or {})}.items():
            tar.addfile(_tar_info(name, FILE, 0o644, len(data)), io.BytesIO(data))

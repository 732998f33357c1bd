"""A build context as ``docker build`` would send it, and the digest that names its image.

The digest covers exactly what the engine receives: ``.dockerignore`` honoured (with our own
matcher, written to Docker's documented rules so the core needs no ``docker`` SDK), paths
sorted, modes normalised to 0644/0755 and owners and times dropped, so a checkout on another
machine or a ``touch`` gives the same digest. The tar we send is written from the same entry
list, with the same normalisation, so what is hashed is what is built.

``.dockerignore`` rules (https://docs.docker.com/build/concepts/context/#dockerignore-files):
one pattern a line, ``#`` lines are comments; each pattern is trimmed and cleaned like Go's
``filepath.Clean`` (``.``/``..`` resolved, trailing ``/`` dropped, a leading ``/`` or ``./``
stripped, ``.`` alone ignored); patterns use Go's ``filepath.Match`` syntax (``*`` and ``?``
never cross ``/``, ``[a-z]``/``[^a]`` classes, ``\\`` escapes) plus ``**`` for any number of
folders; a pattern that matches a folder excludes everything in it; ``!`` makes an exception;
the last pattern that matches a path decides. The Dockerfile and ``.dockerignore`` are always
sent, as the Docker CLI does.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tarfile
from collections.abc import Iterable, Iterator, Mapping
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


def dockerignore_lines(text: str) -> list[str]:
    """The patterns of a ``.dockerignore`` file's text (a UTF-8 byte-order mark, comments and
    blanks dropped): one reading for the build and for the files a build context stores."""
    lines = (line.strip() for line in text.removeprefix("\ufeff").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def read_dockerignore(root: Path) -> list[str]:
    """The patterns of ``root/.dockerignore``."""
    path = root / ".dockerignore"
    if not path.is_file():
        return []
    return dockerignore_lines(path.read_text(encoding="utf-8"))


# -- .dockerignore matching -----------------------------------------------------------------


def _clean(path: str) -> str:
    """Go's ``filepath.Clean`` for a relative pattern, with a leading ``/`` dropped."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            continue  # above the context root is the root itself
        parts.append(part)
    return "/".join(parts) or "."


def _class_to_regex(pattern: str, start: int) -> tuple[str, int]:
    """The regex for the ``[...]`` class opening at ``start``, and the index after it."""
    i = start + 1
    out = "["
    if i < len(pattern) and pattern[i] == "^":
        out += "^"
        i += 1
    first = True
    while i < len(pattern):
        char = pattern[i]
        if char == "]" and not first:
            return out + "]", i + 1
        if char == "\\" and i + 1 < len(pattern):
            i += 1
            char = pattern[i]
        out += "-" if char == "-" and not first else re.escape(char)
        first = False
        i += 1
    raise UserError(f".dockerignore pattern {pattern!r} has an unclosed '['")


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Compile a cleaned pattern the way Docker's pattern matcher does."""
    out = ""
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if i < len(pattern) and pattern[i] == "/":
                i += 1
            out += ".*" if i >= len(pattern) else "(?:.*/)?"
            continue
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[":
            part, i = _class_to_regex(pattern, i)
            out += part
            continue
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(char)
        i += 1
    return re.compile(out + r"\Z", re.DOTALL)


@attrs.frozen
class IgnorePattern:
    """One cleaned ``.dockerignore`` line; ``exception`` for a ``!`` line."""

    text: str
    exception: bool
    regex: re.Pattern[str] = attrs.field(eq=False, repr=False)

    @classmethod
    def parse(cls, line: str) -> IgnorePattern | None:
        """None for a line that excludes nothing (blank, or ``.`` alone)."""
        line = line.strip()
        exception = line.startswith("!")
        if exception:
            line = line[1:].strip()
        if not line:
            return None
        text = _clean(line)
        if text == ".":
            return None
        return cls(text, exception, _pattern_regex(text))

    def matches(self, path: str) -> bool:
        """Whether ``path`` or one of the folders above it matches."""
        if self.regex.match(path):
            return True
        parts = path.split("/")
        return any(self.regex.match("/".join(parts[:i])) for i in range(1, len(parts)))


@attrs.frozen
class DockerIgnore:
    """A ``.dockerignore`` file's patterns, in order (the last one that matches decides)."""

    patterns: tuple[IgnorePattern, ...]

    @classmethod
    def parse(cls, lines: Iterable[str]) -> DockerIgnore:
        parsed = (IgnorePattern.parse(line) for line in lines if not line.startswith("#"))
        return cls(tuple(p for p in parsed if p is not None))

    def excludes(self, path: str) -> bool:
        """Whether the relative POSIX ``path`` is left out of the context."""
        excluded = False
        for pattern in self.patterns:
            if pattern.exception == excluded and pattern.matches(path):
                excluded = not pattern.exception
        return excluded

    def may_include_below(self, folder: str) -> bool:
        """Whether an exception could bring back something inside an excluded ``folder``."""
        prefix = folder + "/"
        return any(p.exception and (p.text + "/").startswith(prefix) for p in self.patterns)


def included_paths(root: str | Path, patterns: Iterable[str],
                   always: Iterable[str] = ()) -> list[str]:
    """Relative POSIX paths (files and folders) under ``root`` not excluded by ``patterns``.

    ``always`` names paths sent whatever the patterns say (the Dockerfile, ``.dockerignore``).
    Symlinks are listed, never followed.
    """
    ignore = DockerIgnore.parse([*patterns, *(f"!{path}" for path in always)])
    root = Path(root)

    def walk(folder: Path, prefix: str) -> Iterator[str]:
        with os.scandir(folder) as items:
            for item in sorted(items, key=lambda entry: entry.name):
                relative = prefix + item.name
                excluded = ignore.excludes(relative)
                if not excluded:
                    yield relative
                if not item.is_dir(follow_symlinks=False):
                    continue
                if not excluded or ignore.may_include_below(relative):
                    yield from walk(Path(item.path), relative + "/")

    return sorted(walk(root, ""))


def context_entries(root: str | Path, *, dockerfile: str = "Dockerfile") -> list[ContextEntry]:
    """Every path ``docker build`` would send from ``root``, sorted."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise UserError(f"build context {root} is not a folder")
    if not (root / dockerfile).is_file():
        raise UserError(f"build context {root} has no {dockerfile}")
    always = (Path(dockerfile).as_posix(), ".dockerignore")
    entries = []
    for relative in included_paths(root, read_dockerignore(root), always):
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

"""A disk cache of the code attrs and cattrs generate, for the CLI's start-up.

Why: attrs writes the methods of each class it builds (``__init__``, ``__repr__``, ``__eq__``)
as source and compiles it, and cattrs does the same for each structure and unstructure
function; a ``run hello`` compiled some 120 such snippets, 36 ms of its 200 ms on the
reference machine, and the same snippets again on every command. Python caches the bytecode
of modules, never of code made at run time.

:func:`install` gives ``attr._make`` and ``cattrs.gen`` a ``compile`` of their own (a module
global shadows the builtin for that module alone) that looks the snippet up by its source,
file name, mode, inherited ``__future__`` flags and optimisation level, and compiles only
what it has not seen. The code comes back from :mod:`marshal`, as a ``.pyc``'s does: the same
code object a compile makes. New entries are written once, at exit, to
``$XDG_CACHE_HOME/agent-env/generated-code-<python magic>.marshal`` (written whole and moved
into place, so parallel commands never leave it half written; a file that does not load is
ignored and rewritten). It is code this process runs, so a file or folder that is not the
user's own, or that others may write to, is not used. Where a library stops calling
``compile`` by that name, or the cache cannot be read or written, everything compiles as
before.

One part of a snippet differs from process to process: attrs seeds a frozen class's
``__hash__`` with ``hash()`` of a string, which Python randomises per process. The key leaves
that number out, and a cached ``__hash__`` gets this process's number put back in its
constants, so the code is exactly what attrs would have compiled here.
"""

from __future__ import annotations
import __future__

import atexit
import builtins
import contextlib
import hashlib
import marshal
import os
import re
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The modules whose ``compile`` calls are cached (attrs' class builder, cattrs' generators).
MODULES = ("attr._make", "cattrs.gen")
#: Past this many entries, a write keeps only those this process used (old sources go).
MAX_ENTRIES = 1000
#: attrs' per-class hash seed in a generated ``__hash__`` (see the module).
_HASH_SEED = re.compile(r"(return hash\(\(\n\s+)(-?\d+),")
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


class CodeCache:
    """Compiled snippets by key (see the module); ``hits`` and ``compiled`` count this
    process's lookups."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: key -> (marshalled code, the hash seed it was compiled with, or None)
        self.entries: dict[str, tuple[bytes, int | None]] = {}
        self.used: set[str] = set()
        self.hits = 0
        self.compiled = 0
        if not (_ours(path.parent) and _ours(path)):
            return  # none yet, or another user could have written it: start empty
        try:
            loaded = marshal.loads(path.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            return  # unreadable: start empty (the write replaces it)
        if isinstance(loaded, dict):
            self.entries = loaded

    def compile(self, source: Any, filename: Any, mode: str, flags: int = 0,
                dont_inherit: bool = False, optimize: int = -1, **options: Any) -> Any:
        """``compile`` for the calling module, caching what it compiles from a ``str``."""
        if not isinstance(source, str) or not isinstance(filename, str) or flags or \
                dont_inherit or options:
            return builtins.compile(source, filename, mode, flags, dont_inherit, optimize,
                                    **options)
        # what the builtin would inherit from its caller (the generator's own __future__s)
        inherited = sys._getframe(1).f_code.co_flags & _FUTURE_FLAGS
        level = sys.flags.optimize if optimize == -1 else optimize
        seed_found = _HASH_SEED.search(source)
        seed = int(seed_found.group(2)) if seed_found else None
        keyed = source if seed_found is None else \
            source[:seed_found.start(2)] + "SEED" + source[seed_found.end(2):]
        key = hashlib.sha1(f"{inherited}\0{level}\0{mode}\0{filename}\0{keyed}".encode(
            "utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
        self.used.add(key)
        found = self.entries.get(key)
        if isinstance(found, tuple) and len(found) == 2:
            try:
                code = marshal.loads(found[0])
            except (ValueError, EOFError, TypeError):
                pass
            else:
                if isinstance(code, types.CodeType):
                    self.hits += 1
                    return code if found[1] == seed else _reseeded(code, found[1], seed)
        code = builtins.compile(source, filename, mode, inherited, True, level)
        self.entries[key] = (marshal.dumps(code), seed)
        self.compiled += 1
        return code

    def save(self) -> None:
        """Write the file if this process compiled anything new (best effort)."""
        if not self.compiled:
            return
        entries = self.entries
        if len(entries) > MAX_ENTRIES:
            entries = {k: v for k, v in entries.items() if k in self.used}
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _ours(self.path.parent):
                return
            temporary.write_bytes(marshal.dumps(entries))
            os.replace(temporary, self.path)
        except OSError:  # a read-only or missing folder: the next command compiles again
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)


def _ours(path: Path) -> bool:
    """Whether ``path`` is this user's and no one else may write it. The cache is code this
    process runs, so a file or folder another user could have written is neither read nor
    written (ssh's rule for its keys); where there are no such owners (Windows), the folder's
    access rules decide."""
    if not hasattr(os, "getuid"):
        return path.exists()
    try:
        found = path.stat()
    except OSError:
        return False
    return found.st_uid == os.getuid() and not found.st_mode & 0o022


def _reseeded(code: types.CodeType, old: Any, new: Any) -> types.CodeType:
    """``code`` with the constant ``old`` (a hash seed) replaced by ``new`` wherever it is,
    nested functions included."""
    consts = tuple(
        new if type(c) is int and c == old
        else _reseeded(c, old, new) if isinstance(c, types.CodeType) else c
        for c in code.co_consts)
    return code.replace(co_consts=consts)


def default_path() -> Path:
    from importlib.util import MAGIC_NUMBER

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent-env" / f"generated-code-{MAGIC_NUMBER.hex()}.marshal"


def install(path: Path | None = None) -> CodeCache | None:
    """Cache the compiles of :data:`MODULES` for this process (each given its ``compile`` now
    if imported, else when it is); None when it cannot (no home folder for the file)."""
    import importlib

    try:
        cache = CodeCache(path or default_path())
    except RuntimeError:  # Path.home() with no home
        return None
    for name in MODULES:
        if name in sys.modules:
            importlib.import_module(name).compile = cache.compile  # type: ignore[attr-defined]
        else:  # not every command imports them (plugin list never loads cattrs)
            sys.meta_path.insert(0, _GiveCompile(name, cache))
    atexit.register(cache.save)
    return cache


class _GiveCompile:
    """A meta path finder (once, for ``name``) that sets the module's ``compile`` to the
    cache's as soon as the module exists, before its code runs."""

    def __init__(self, name: str, cache: CodeCache) -> None:
        self.name = name
        self.cache = cache

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> Any:
        if name != self.name:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # once: the real finders find it
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        real_exec = loader.exec_module
        cache = self.cache

        def exec_module(module: types.ModuleType) -> None:
            module.compile = cache.compile  # type: ignore[attr-defined]
            real_exec(module)

        loader.exec_module = exec_module
        return spec

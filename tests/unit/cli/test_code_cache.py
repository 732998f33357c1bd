"""The generated-code cache gives back what ``compile`` would have made, across processes."""

from __future__ import annotations

import builtins
import marshal
from pathlib import Path

import attrs

from agent_env.cli.code_cache import CodeCache

SNIPPET = "def f(x: Unknown) -> int:\n    return x + 1\n"
NAME = "<attrs generated methods tests.Thing>"


def _same(a, b) -> bool:
    return (a.co_code, a.co_flags, a.co_filename, a.co_names) == \
        (b.co_code, b.co_flags, b.co_filename, b.co_names) and \
        all(_same(x, y) if hasattr(x, "co_code") else x == y
            for x, y in zip(a.co_consts, b.co_consts, strict=True))


def test_a_second_process_gets_the_code_compile_would_make(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    first = CodeCache(path)
    made = first.compile(SNIPPET, NAME, "exec")
    assert (first.hits, first.compiled) == (0, 1)
    first.save()
    second = CodeCache(path)  # as the next command loads it
    found = second.compile(SNIPPET, NAME, "exec")
    assert (second.hits, second.compiled) == (1, 0)
    # this module has `from __future__ import annotations`, which compile inherits: so does
    # the cache (else `Unknown` would be looked up when f is defined, and fail)
    expected = builtins.compile(SNIPPET, NAME, "exec")
    assert _same(found, expected) and _same(made, expected)
    namespace: dict = {}
    exec(found, namespace)
    assert namespace["f"](1) == 2
    path.write_bytes(b"left alone")
    second.save()  # nothing new compiled: the file is not written again
    assert path.read_bytes() == b"left alone"


def test_another_source_name_or_mode_is_compiled_anew(tmp_path: Path) -> None:
    cache = CodeCache(tmp_path / "code.marshal")
    cache.compile(SNIPPET, NAME, "exec")
    cache.compile(SNIPPET.replace("+ 1", "+ 2"), NAME, "exec")
    cache.compile(SNIPPET, NAME.replace("Thing", "Other"), "exec")
    cache.compile("1 + 1", NAME, "eval")
    assert (cache.hits, cache.compiled) == (0, 4)


def test_a_frozen_class_hash_seed_is_this_processes(tmp_path: Path) -> None:
    """attrs seeds ``__hash__`` with a per-process number; a cached ``__hash__`` made with
    another process's seed is given this one's."""
    script = ("def __hash__(self):\n        return hash((\n                {seed},\n"
              "                self.x,\n            ))\n")
    path = tmp_path / "code.marshal"
    earlier = CodeCache(path)
    earlier.compile(script.format(seed=1111), NAME, "exec")
    earlier.save()
    now = CodeCache(path)
    code = now.compile(script.format(seed=-2222), NAME, "exec")
    assert now.hits == 1
    namespace: dict = {}
    exec(code, namespace)

    class Point:
        x = 5

    assert namespace["__hash__"](Point()) == hash((-2222, 5))


def test_a_damaged_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    path.write_bytes(b"\x00not marshal data")
    cache = CodeCache(path)
    assert cache.entries == {}
    cache.compile(SNIPPET, NAME, "exec")
    cache.save()
    assert len(marshal.loads(path.read_bytes())) == 1


def test_attrs_classes_built_with_it_behave_as_without(tmp_path: Path, monkeypatch) -> None:
    import attr._make

    for round_ in range(2):  # the second builds from the cache
        cache = CodeCache(tmp_path / "code.marshal")
        monkeypatch.setattr(attr._make, "compile", cache.compile, raising=False)

        @attrs.frozen
        class Pair:
            a: int
            b: str = "x"

        assert (cache.hits, cache.compiled) == ((0, 1) if round_ == 0 else (1, 0))
        cache.save()
        assert Pair(1) == Pair(1, "x") and Pair(1) != Pair(2)
        assert hash(Pair(1)) == hash(Pair(1, "x"))
        assert repr(Pair(1)) == "Pair(a=1, b='x')"


def test_a_file_or_folder_others_may_write_is_not_used(tmp_path: Path) -> None:
    """The cache is code the CLI runs: one another user could have written is not read, and
    a folder others may write to is not written to."""
    folder = tmp_path / "agent-env"
    path = folder / "code.marshal"
    first = CodeCache(path)
    first.compile(SNIPPET, NAME, "exec")
    first.save()
    assert folder.stat().st_mode & 0o777 == 0o700
    path.chmod(0o666)
    assert CodeCache(path).entries == {}  # world-writable file: ignored
    path.chmod(0o644)
    assert len(CodeCache(path).entries) == 1
    folder.chmod(0o777)
    shared = CodeCache(path)
    assert shared.entries == {}  # world-writable folder: ignored
    shared.compile(SNIPPET + "\n", NAME, "exec")
    path.unlink()
    shared.save()
    assert not path.exists()  # and not written to

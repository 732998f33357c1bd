"""The core's .dockerignore matcher, context digest and tar: Docker's rules without the SDK."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from agent_env.errors import UserError
from agent_env.images.context import (
    DockerIgnore,
    context_digest,
    context_entries,
    included_paths,
    write_context_tar,
)


def _tree(root: Path, *paths: str) -> Path:
    for relative in paths:
        path = root / relative
        if relative.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(relative)
    return root


@pytest.mark.parametrize(
    ("patterns", "path", "excluded"),
    [
        (["scratch/"], "scratch", True),  # the docker_env build test's case
        (["scratch/"], "scratch/a", True),  # a folder's pattern excludes what is inside
        (["scratch/"], "other/scratch", False),  # patterns are anchored at the root
        (["*.pyc"], "x.pyc", True),
        (["*.pyc"], "pkg/x.pyc", False),  # `*` never crosses `/`
        (["**/*.pyc"], "pkg/sub/x.pyc", True),
        (["**/*.pyc"], "x.pyc", True),  # `**/` matches zero folders too
        (["a/**/b"], "a/b", True),
        (["a/**/b"], "a/x/y/b", True),
        (["a/**"], "a/x/y", True),
        (["/abs/x"], "abs/x", True),  # a leading / is the context root
        (["./dot"], "dot", True),
        (["a/../b"], "b", True),  # cleaned like Go's filepath.Clean
        (["."], "anything", False),  # `.` alone is ignored, for historical reasons
        (["?.txt"], "a.txt", True),
        (["?.txt"], "ab.txt", False),
        (["[a-c].txt"], "b.txt", True),
        (["[^a-c].txt"], "b.txt", False),
        (["[^a-c].txt"], "d.txt", True),
        (["\\*.txt"], "*.txt", True),  # an escaped star is a star
        (["\\*.txt"], "a.txt", False),
        (["*.md", "!README.md"], "README.md", False),  # an exception
        (["*.md", "!README.md"], "NOTES.md", True),
        (["!README.md", "*.md"], "README.md", True),  # the last match wins
        (["docs", "!docs/keep"], "docs/keep/x", False),
        (["docs", "!docs/keep"], "docs/other", True),
        (["  spaced  "], "spaced", True),  # trimmed
    ],
)
def test_patterns_follow_dockers_rules(patterns: list[str], path: str, excluded: bool) -> None:
    assert DockerIgnore.parse(patterns).excludes(path) is excluded


def test_an_unclosed_class_names_the_pattern() -> None:
    with pytest.raises(UserError, match=r"\[abc"):
        DockerIgnore.parse(["[abc"])


def test_an_excluded_folder_is_entered_only_for_an_exception_inside_it(tmp_path: Path) -> None:
    root = _tree(tmp_path, "docs/keep.txt", "docs/drop.txt", "Dockerfile", "app.py")
    assert included_paths(root, ["docs", "!docs/keep.txt"]) == [
        "Dockerfile", "app.py", "docs/keep.txt"]
    assert included_paths(root, ["docs", "!**/keep.txt"]) == ["Dockerfile", "app.py"]


def test_the_dockerfile_and_dockerignore_are_always_sent(tmp_path: Path) -> None:
    root = _tree(tmp_path, "Dockerfile", "app.py", "scratch/a")
    (root / ".dockerignore").write_text("# comment\n*\n!app.py\n")
    paths = [entry.path for entry in context_entries(root)]
    assert paths == [".dockerignore", "Dockerfile", "app.py"]


def test_symlinks_are_listed_not_followed(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ctx", "Dockerfile", "real/file")
    os.symlink("real", root / "link")
    kinds = {entry.path: entry.kind for entry in context_entries(root)}
    assert kinds == {"Dockerfile": "file", "link": "symlink", "real": "dir", "real/file": "file"}


def test_digest_ignores_ignored_files_times_and_group_bits(tmp_path: Path) -> None:
    root = _tree(tmp_path, "Dockerfile", "app.py")
    (root / ".dockerignore").write_text("scratch/\n")
    before = context_digest(context_entries(root))
    _tree(root, "scratch/a")
    os.chmod(root / "app.py", 0o664)
    os.utime(root / "app.py", (1, 1))
    assert context_digest(context_entries(root)) == before
    (root / "app.py").write_text("changed")
    assert context_digest(context_entries(root)) != before


def test_the_tar_holds_the_entries_normalised(tmp_path: Path) -> None:
    root = _tree(tmp_path, "Dockerfile", "bin/run")
    os.chmod(root / "bin/run", 0o775)
    buffer = io.BytesIO()
    write_context_tar(context_entries(root), buffer, replace={"Dockerfile": b"FROM x\n"},
                      extra={"added": b"1"})
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile("Dockerfile").read() == b"FROM x\n"
    assert set(members) == {"Dockerfile", "bin", "bin/run", "added"}
    assert members["bin/run"].mode == 0o755 and members["bin/run"].mtime == 0


TRICKY = [
    ["scratch/"],
    ["*.pyc", "!keep.pyc"],
    ["**/*.log"],
    ["**/node_modules"],
    ["a/**/b"],
    ["/abs", "./dot/x"],
    ["docs", "!docs/keep.txt"],
    ["*", "!src", "src/*.tmp"],
    ["[a-c]?.txt", "!b1.txt"],
    ["a/../pkg/*.pyc"],
]
FILES = [
    "Dockerfile", "keep.pyc", "x.pyc", "pkg/y.pyc", "pkg/z.py", "logs/a.log", "b.log",
    "web/node_modules/m.js", "node_modules/n.js", "a/b", "a/x/y/b/c", "abs/f", "dot/x", "dot/y",
    "docs/keep.txt", "docs/drop.txt", "src/m.py", "src/t.tmp", "a1.txt", "b1.txt", "d1.txt",
    "scratch/s",
]


@pytest.mark.parametrize("patterns", TRICKY, ids=lambda p: " ".join(p))
def test_we_agree_with_the_docker_sdk(tmp_path: Path, patterns: list[str]) -> None:
    """The only place the core's tests import docker: its matcher is the reference."""
    build = pytest.importorskip("docker.utils.build")
    root = _tree(tmp_path, *FILES)
    theirs = {p.replace(os.sep, "/") for p in build.exclude_paths(str(root), list(patterns))}
    assert set(included_paths(root, patterns, always=["Dockerfile"])) == theirs

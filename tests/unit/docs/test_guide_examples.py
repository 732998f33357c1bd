"""Every block the guide marks runnable runs, as a reader would run it, and says what it shows.

The guide builds on itself (the env written on one page is played on another), so the pages run
in nav order in one working folder with its own state root; ``docs/_gen/examples.py`` explains
the marks. Blocks that need Docker run in ``tests/integration/docs/``; everything else runs
here, the env SDK example included (it serves the env in-process).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def load_examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("guide_examples",
                                                  ROOT / "docs" / "_gen" / "examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


examples = load_examples()


def test_the_marks_are_well_formed_and_cover_every_guide_area() -> None:
    blocks = list(examples.all_blocks())  # raises on a mark that is not before a fence
    runnable = {(b.page, b.lang, b.docker) for b in blocks if b.kind == "run"}
    assert ("environments.md", "python", False) in runnable  # the env SDK, in-process
    assert ("episodes.md", "python", True) in runnable       # the episode loop, on Docker
    assert ("environments.md", "console", True) in runnable  # deploy the env with Docker
    assert ("getting-started.md", "console", False) in runnable
    installs = [b for b in blocks if b.kind == "run" and "network" in b.options]
    assert any("uv tool install ." in b.body for b in installs)  # the install from a clone
    for block in blocks:
        if block.kind == "file":
            assert block.options and not Path(block.options[0]).is_absolute(), block.where


def test_the_guide_runs_as_shown(tmp_path: Path) -> None:
    ran = examples.run_guide(tmp_path, integration=False)
    pages = {block.page for block in ran if block.kind == "run"}
    assert {"getting-started.md", "environments.md", "tasks.md", "configuration.md",
            "protocol.md"} <= pages
    # what the reader wrote is there, as the pages said
    assert (tmp_path / "my-bundle" / "tasks" / "count.json").is_file()


@pytest.mark.parametrize(("shown", "printed", "missing"), [
    (["a ... c", "done"], ["x", "a b c", "y", "done"], None),
    (["done", "a ... c"], ["a b c", "done"], "a ... c"),         # order matters
    (["[tasks/x.json] passed"], ["[tasks/x.json] failed"], "[tasks/x.json] passed"),
    (["...", ""], [], None),                                      # wildcard and blank lines
])
def test_the_output_check_matches_lines_in_order(shown: list[str], printed: list[str],
                                                 missing: str | None) -> None:
    assert examples.unmatched(shown, printed) == missing


def test_a_command_that_prints_something_else_fails_its_block(tmp_path: Path) -> None:
    block = examples.Block("x.md", 3, "run", "console", "$ echo hello\nhullo\n")
    with pytest.raises(examples.ExampleFailed, match=r"docs/x\.md:3: the guide shows 'hullo'"):
        examples.run_block(block, tmp_path)
    failing = examples.Block("x.md", 9, "run", "console", "$ false\n")
    with pytest.raises(examples.ExampleFailed, match="exited 1, the guide says 0"):
        examples.run_block(failing, tmp_path)
    expected = examples.Block("x.md", 9, "run", "console", "$ false\n", ("exit=1",))
    examples.run_block(expected, tmp_path)

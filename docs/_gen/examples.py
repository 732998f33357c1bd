"""The guide's runnable examples: find them in the pages and run them, as a reader would.

A page marks a fenced block with an HTML comment on the line before it (invisible in the built
site):

* ``<!-- file: PATH -->``: the block is the content of ``PATH`` (relative to the reader's
  working folder); it is written there before the blocks after it run. Its fence shows the
  reader the path as its title (```` ```python title="PATH" ````), which must match.
* ``<!-- run -->``: a ``python`` block is run as a script with this Python; a ``console`` block's
  ``$ COMMAND`` lines are run with bash, and the lines shown after a command must appear in its
  output in that order (``...`` in a line matches anything). Options after ``run:``, comma
  separated: ``docker`` (needs a Docker daemon: run by the integration tier only),
  ``network`` (installs packages from the package index: integration tier only; the block's
  commands find what ``uv tool install`` put in the working folder's ``.uv-bin`` first on
  ``PATH``), ``cwd=repo`` (run in the repository's root instead of the working folder),
  ``exit=N`` (every command of the block must exit N; default 0).

Pages run in the order of ``nav`` in ``mkdocs.yml``, all in ONE working folder, because the
guide builds on itself (the env written on one page is played on another). The working folder
gets its own state root (``AGENT_ENV_STATE_DIR``) and no config file, so the examples see what a
newcomer sees. ``tests/unit/docs/test_guide_examples.py`` and ``tests/integration/docs/`` load
this module by path.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_BLOCK = re.compile(
    r"^<!-- (?P<kind>run|file)(?::\s*(?P<options>.*?))? -->\n"
    r"```(?P<lang>[\w-]*)(?: title=\"(?P<title>[^\"]*)\")?[^\n]*\n(?P<body>.*?)^```\s*$",
    re.MULTILINE | re.DOTALL,
)
_FENCE_MARK = re.compile(r"^<!-- (run|file)\b", re.MULTILINE)


@attrs.frozen
class Block:
    """One marked block of a page."""

    page: str
    line: int
    kind: str
    lang: str
    body: str
    options: tuple[str, ...] = ()
    title: str | None = None

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"

    @property
    def docker(self) -> bool:
        return "docker" in self.options

    @property
    def integration(self) -> bool:
        """Needs what only the integration tier has: Docker, or installs from the index."""
        return self.docker or "network" in self.options

    @property
    def expected_exit(self) -> int:
        for option in self.options:
            if option.startswith("exit="):
                return int(option.removeprefix("exit="))
        return 0


def nav_pages() -> list[str]:
    """The hand-written pages in nav order (generated ones have nothing to run)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    pages = re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, re.MULTILINE)
    return [p for p in pages if (DOCS / p).is_file()]


def blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        options = tuple(o.strip() for o in (match["options"] or "").split(",") if o.strip())
        line = text.count("\n", 0, match.start()) + 2
        found.append(Block(page, line, match["kind"], match["lang"], match["body"], options,
                           match["title"]))
    marks = len(_FENCE_MARK.findall(text))
    if marks != len(found):
        raise ValueError(f"docs/{page}: {marks} run/file marks but {len(found)} marked blocks "
                         "(a mark must sit on the line right before a fence)")
    return found


def all_blocks() -> Iterator[Block]:
    for page in nav_pages():
        yield from blocks(page)


def environment(workdir: Path, *, tools_first: bool = False) -> dict[str, str]:
    """What a newcomer's shell has: this Python's scripts first, a state root of its own, and
    ``uv tool`` installs kept in the working folder (first on ``PATH`` with ``tools_first``)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AGENT_ENV_") and k not in ("PYTEST_CURRENT_TEST",)}
    path = [str(Path(sys.executable).parent), env.get("PATH", "")]
    env["UV_TOOL_DIR"] = str(workdir / ".uv-tools")
    env["UV_TOOL_BIN_DIR"] = str(workdir / ".uv-bin")
    if tools_first:
        path.insert(0, env["UV_TOOL_BIN_DIR"])
    env["PATH"] = os.pathsep.join(path)
    env["AGENT_ENV_STATE_DIR"] = str(workdir / ".state")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class ExampleFailed(AssertionError):
    pass


def run_block(block: Block, workdir: Path, *, timeout: float = 600) -> None:
    """Write or run one block in ``workdir``; ExampleFailed says where and why."""
    if block.kind == "file":
        if not block.options:
            raise ExampleFailed(f"{block.where}: a file mark needs a path (<!-- file: PATH -->)")
        if block.title != block.options[0]:
            raise ExampleFailed(f"{block.where}: the block's title ({block.title!r}) must show "
                                f"the reader the path it is written to, {block.options[0]!r}")
        target = workdir / block.options[0]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.body, encoding="utf-8")
        return
    env = environment(workdir, tools_first="network" in block.options)
    cwd = ROOT if "cwd=repo" in block.options else workdir
    if block.lang == "python":
        script = workdir / f".block-{Path(block.page).stem}-{block.line}.py"
        script.write_text(block.body, encoding="utf-8")
        _check(block, [sys.executable, str(script)], cwd, env, timeout, expected=[])
    elif block.lang in ("console", "shell-session"):
        for command, expected in _commands(block):
            _check(block, ["bash", "-c", command], cwd, env, timeout, expected)
    else:
        raise ExampleFailed(f"{block.where}: cannot run a '{block.lang}' block")


def _commands(block: Block) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for line in block.body.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
        elif line.strip():
            raise ExampleFailed(f"{block.where}: output before the first '$ ' command")
    return found


def _check(block: Block, argv: list[str], workdir: Path, env: dict[str, str], timeout: float,
           expected: list[str]) -> None:
    shown = " ".join(argv[2:]) if argv[0] == "bash" else "the python block"
    try:
        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ExampleFailed(f"{block.where}: {shown} took more than {timeout:.0f}s") from None
    output = done.stdout + done.stderr
    if done.returncode != block.expected_exit:
        raise ExampleFailed(f"{block.where}: {shown} exited {done.returncode}, the guide says "
                            f"{block.expected_exit}:\n{output}")
    missing = unmatched(expected, output.splitlines())
    if missing is not None:
        raise ExampleFailed(f"{block.where}: the guide shows {missing!r} after {shown}, "
                            f"which printed:\n{output}")


def unmatched(expected: list[str], actual: list[str]) -> str | None:
    """The first shown line with no match in ``actual`` (matched in order), or None."""
    position = 0
    for line in expected:
        if not line.strip() or line.strip() == "...":
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in line.rstrip().split("...")))
        while position < len(actual) and not pattern.fullmatch(actual[position].rstrip()):
            position += 1
        if position == len(actual):
            return line
        position += 1
    return None


def run_guide(workdir: Path, *, integration: bool) -> list[Block]:
    """Run every page's blocks in nav order; those that need Docker or the package index only
    when ``integration``. Returns the blocks that ran."""
    ran = []
    for block in all_blocks():
        if block.kind == "run" and block.integration and not integration:
            continue
        run_block(block, workdir)
        ran.append(block)
    return ran

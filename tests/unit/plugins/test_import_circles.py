"""No new import circles in the kernel, the plugins or the protocol SDK.

A circle is a set of modules that import each other, directly or through others (imports
inside functions count: a lazy import is still a back-and-forth; imports under
``TYPE_CHECKING`` do not). The graph is read from the sources with ``ast`` and its strongly
connected components are the circles. The kernel and the plugins have none. ``KNOWN`` lists the
protocol SDK's two, which are its lazy ``serve()`` and ``mount()`` conveniences (a package
that starts a server of its own submodule on request) and may stay: a new circle, or a known
one that grows, fails this test, and so does a known one that is gone, so the list only
shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

KNOWN = {
    # env's serve() and mount() (the reference's FastMCP mount) start its own server modules
    frozenset({"agentenv_protocol.env", "agentenv_protocol.server",
               "agentenv_protocol.mounting"}),
    frozenset({"agentenv_protocol.agent.app", "agentenv_protocol.agent.changelog",
               "agentenv_protocol.agent.extensions", "agentenv_protocol.agent.framework",
               "agentenv_protocol.agent.skills", "agentenv_protocol.agent.snapshot"}),
}


def modules() -> dict[str, Path]:
    """Every module of the kernel, the protocol SDK and the plugins, by dotted name."""
    roots = [(ROOT / "core", "agent_env"), (ROOT / "protocol", "agentenv_protocol")]
    roots += [(folder.parent, folder.name) for folder in ROOT.glob("plugins/*/agentenv_*")
              if (folder / "__init__.py").is_file()]
    found = {}
    for base, package in roots:
        for path in (base / package).rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return hidden


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The known modules ``name`` imports (``from pkg import mod`` names the submodule)."""

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    hidden = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            found = owner(target)
            if found is not None and found != name:
                yield found


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == {frozenset({"a", "b", "c"})}


def test_no_new_import_circles() -> None:
    known = modules()
    assert len(known) > 200  # the walk found the sources
    graph = {name: set(imported(name, path, known)) for name, path in known.items()}
    found = circles(graph)
    new = sorted(sorted(c) for c in found - KNOWN)
    gone = sorted(sorted(c) for c in KNOWN - found)
    assert new == [], f"new or grown import circles: {new}"
    assert gone == [], f"circles broken (remove them from KNOWN): {gone}"

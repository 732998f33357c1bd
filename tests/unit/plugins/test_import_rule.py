"""The design rule, checked on the sources: the kernel imports no plugin, no plugin another.

Env types and providers meet only through ``agent_env.sandbox.base``; shared machinery lives in
the core (``agent_env.images``, ``agent_env.sandbox.docker_host``). A plugin may import its own
package, ``agent_env``, ``agentenv_protocol`` and third-party packages, nothing else named
``agentenv_*``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SHARED = {"agent_env", "agentenv_protocol"}
PLUGIN_PACKAGES = sorted(
    (folder.parent.name, folder.name)
    for folder in ROOT.glob("plugins/*/agentenv_*")
    if (folder / "__init__.py").is_file()
)


def _imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, top-level module) for every absolute import, and every import_module("...")."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", None)) in ("import_module", "__import__") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value.split(".")[0]


def _ours(module: str) -> bool:
    return module == "agent_env" or module.startswith("agentenv_")


def _violations(folder: Path, allowed: set[str]) -> list[str]:
    return [
        f"{path.relative_to(folder.parent)}:{line} imports {module}"
        for path in sorted(folder.rglob("*.py"))
        for line, module in sorted(_imported(path))
        if _ours(module) and module not in allowed
    ]


def test_there_are_plugins_to_check() -> None:
    names = {package for _, package in PLUGIN_PACKAGES}
    assert {"agentenv_docker_env", "agentenv_mcp_env", "agentenv_tensorlake"} <= names


@pytest.mark.parametrize(("plugin", "package"), PLUGIN_PACKAGES, ids=lambda v: v)
def test_a_plugin_imports_only_itself_the_core_and_the_protocol(plugin: str, package: str) -> None:
    folder = ROOT / "plugins" / plugin / package
    assert _violations(folder, SHARED | {package}) == []


def test_the_core_imports_no_plugin() -> None:
    assert _violations(ROOT / "core" / "agent_env", {"agent_env", "agentenv_protocol"}) == []


def test_the_checker_sees_a_cross_plugin_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import os\nfrom agentenv_docker_env.build import plan_build\n"
        "def f():\n    import agentenv_mcp_env\n"
        "    importlib.import_module('agentenv_tenki.provider')\n"
        "from . import sibling\nimport docker\nfrom agent_env.images import plan\n"
    )
    found = [v.split(" imports ")[1] for v in _violations(tmp_path, SHARED)]
    assert found == ["agentenv_docker_env", "agentenv_mcp_env", "agentenv_tenki"]


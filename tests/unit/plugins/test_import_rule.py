"""The design rule, checked on the sources: the kernel imports no plugin, no plugin another, and
a plugin reaches the kernel only through ``agent_env.api``.

Env types and providers meet only through the sandbox contract; shared machinery lives in the
core and is exported by ``agent_env.api``, so the kernel can reorganise its other modules without
breaking a plugin. A plugin (and every example, which people copy) may import its own package,
``agent_env.api``, ``agentenv_protocol`` and third-party packages: no other ``agent_env``
module and nothing else named ``agentenv_*``, at module level, inside functions, or as an
``import_module("...")`` string.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
API = "agent_env.api"
PROTOCOL = "agentenv_protocol"
PLUGIN_PACKAGES = sorted(
    (folder.parent.name, folder.name)
    for folder in ROOT.glob("plugins/*/agentenv_*")
    if (folder / "__init__.py").is_file()
)
#: Every example folder, with the package it ships (None: scripts only).
EXAMPLES = sorted(
    [(f"plugins/{folder.parent.name}", folder.name)
     for folder in ROOT.glob("examples/plugins/*/agentenv_*")
     if (folder / "__init__.py").is_file()]
    + [(folder.name, None) for folder in ROOT.glob("examples/*")
       if folder.is_dir() and folder.name != "plugins"]
)


def _imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted module) for every absolute import, and every import_module("...").

    ``from agent_env import api`` is the module ``agent_env.api``: each name imported from a
    package counts as that package's submodule, so ``from agent_env import config`` is caught.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "agent_env":
                for alias in node.names:
                    yield node.lineno, f"agent_env.{alias.name}"
            else:
                yield node.lineno, node.module
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", None)) in ("import_module", "__import__") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value


def _refused(module: str, own: str | None) -> bool:
    """Whether a plugin whose package is ``own`` may not import ``module``."""
    top = module.split(".")[0]
    if top == "agent_env":
        return module != API and not module.startswith(API + ".")
    if top.startswith("agentenv_"):
        return top not in (PROTOCOL, own)
    return False


def _plugin_violations(folder: Path, own: str | None) -> list[str]:
    return [
        f"{path.relative_to(folder.parent)}:{line} imports {module}"
        for path in sorted(folder.rglob("*.py"))
        for line, module in sorted(_imported(path))
        if _refused(module, own)
    ]


def test_there_are_plugins_and_examples_to_check() -> None:
    names = {package for _, package in PLUGIN_PACKAGES}
    assert {"agentenv_docker_env", "agentenv_mcp_env", "agentenv_tensorlake"} <= names
    assert ("plugins/write-file", "agentenv_write_file") in EXAMPLES
    assert ("episodes", None) in EXAMPLES


@pytest.mark.parametrize(("plugin", "package"), PLUGIN_PACKAGES, ids=lambda v: v)
def test_a_plugin_imports_only_itself_the_api_and_the_protocol(plugin: str, package: str) -> None:
    folder = ROOT / "plugins" / plugin / package
    assert _plugin_violations(folder, package) == []


@pytest.mark.parametrize(("example", "package"), EXAMPLES, ids=lambda v: str(v))
def test_an_example_imports_only_the_api_and_the_protocol(
    example: str, package: str | None
) -> None:
    folder = ROOT / "examples" / example
    assert _plugin_violations(folder, package) == []


def test_the_core_imports_no_plugin() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "core" / "agent_env").rglob("*.py"))
        for line, module in sorted(_imported(path))
        if module.split(".")[0].startswith("agentenv_")
        and module.split(".")[0] != PROTOCOL
    ]
    assert found == []


def test_the_checker_sees_cross_plugin_and_kernel_internal_imports(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import os\nfrom agentenv_docker_env.build import build_image\n"
        "def f():\n    import agentenv_mcp_env\n"
        "    from agent_env.plugins import get_host\n"
        "    importlib.import_module('agentenv_tenki.provider')\n"
        "    importlib.import_module('agent_env.config')\n"
        "from . import sibling\nimport docker\nfrom agent_env.images import plan\n"
        "from agent_env.tasks.steps import Step\n"
        "from agent_env.api import Step, hookimpl\nimport agent_env.api\n"
        "from agent_env import api\nfrom agent_env import config\nimport agent_env\n"
        "from agentenv_protocol.client import McpClient\nfrom agentenv_own.x import y\n"
    )
    found = [v.split(" imports ")[1] for v in _plugin_violations(tmp_path, "agentenv_own")]
    assert found == [
        "agentenv_docker_env.build", "agentenv_mcp_env", "agent_env.plugins",
        "agentenv_tenki.provider", "agent_env.config", "agent_env.images",
        "agent_env.tasks.steps", "agent_env.config", "agent_env",
    ]


def test_the_step_import_of_the_old_examples_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plugin.py").write_text("from agent_env.tasks.steps import Step\n")
    assert _plugin_violations(tmp_path, None) == [
        f"{tmp_path.name}/plugin.py:1 imports agent_env.tasks.steps"
    ]

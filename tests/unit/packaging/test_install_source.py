"""Our distribution names also exist on PyPI (the reference's): prove ours are the ones loaded."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "module", ["agent_env", "agentenv_protocol", "agentenv_docker_env"]
)
def test_installed_packages_come_from_this_checkout(module: str) -> None:
    loaded = Path(importlib.import_module(module).__file__).resolve()
    assert loaded.is_relative_to(ROOT), f"{module} loaded from {loaded}, not from {ROOT}"


def test_the_core_version_is_ours() -> None:
    from importlib import metadata

    from agent_env._version import VERSION

    assert metadata.version("agentenv-framework") == VERSION
    assert not VERSION.startswith("0.9.")  # the reference's line on PyPI

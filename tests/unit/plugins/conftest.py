"""Toy plugin distributions made on the fly: a dist-info folder and a module on sys.path."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_env import runtime

ToyFactory = Callable[..., str]


@pytest.fixture
def toy_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ToyFactory]:
    """Returns ``make(dist, module_source, requires=[...], entry_name=None)``."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    made: list[str] = []

    def make(dist: str, source: str, *, requires: list[str] | None = None,
             entry_name: str | None = None, version: str = "1.0") -> str:
        module = dist.replace("-", "_")
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{module}-{version}.dist-info"
        info.mkdir()
        lines = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
        lines += [f"Requires-Dist: {r}" for r in requires or []]
        (info / "METADATA").write_text("\n".join(lines) + "\n")
        (info / "entry_points.txt").write_text(
            f"[agent_env]\n{entry_name or module} = {module}\n"
        )
        made.append(module)
        return module

    yield make
    for module in made:
        sys.modules.pop(module, None)
    import importlib

    importlib.invalidate_caches()


@pytest.fixture(autouse=True)
def _fresh_kernel_state() -> Iterator[None]:
    runtime.reset()
    yield
    runtime.reset()

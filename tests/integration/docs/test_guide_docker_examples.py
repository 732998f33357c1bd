"""The guide's runnable blocks that need Docker (the env deployed, the episode loop) or the
package index (`uv tool install .` from the clone), with every block before them, in one working
folder as a reader would run them (see docs/_gen/examples.py).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_the_whole_guide_runs_as_shown_on_docker(docker_client: Any, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("guide_examples",
                                                  ROOT / "docs" / "_gen" / "examples.py")
    assert spec is not None and spec.loader is not None
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)

    ran = examples.run_guide(tmp_path, integration=True)
    docker_blocks = [b for b in ran if b.kind == "run" and b.docker]
    assert {b.page for b in docker_blocks} >= {"environments.md", "episodes.md"}
    assert any("uv tool install ." in b.body for b in ran)  # the install from a clone
    # every run tore down what it made: nothing the guide's runs labelled is left
    leftover = [c.name for c in docker_client.containers.list(all=True)
                if str(tmp_path) in str(c.labels)]
    assert leftover == []

"""The Docker-in-a-sandbox module is copied into three plugins until it moves into the core;
the copies must not drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
COPIES = [ROOT / "plugins" / p / f"agentenv_{p}" / "docker_host.py"
          for p in ("tensorlake", "tenki", "smol_vm")]


def test_the_docker_host_copies_are_identical() -> None:
    present = [path for path in COPIES if path.exists()]
    if len(present) < 2:
        pytest.fail(f"expected the docker_host copies at {COPIES}")
    texts = {path.read_text(encoding="utf-8") for path in present}
    assert len(texts) == 1, "plugins/*/docker_host.py differ: edit all copies together"

"""THIRD_PARTY_NOTICES.md is current: its generator, run as a script, finds nothing to change."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_third_party_notices_are_current() -> None:
    """THIRD_PARTY_NOTICES.md is what docs/_gen/third_party.py makes from uv.lock right now."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "docs" / "_gen" / "third_party.py"),
                           "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = (ROOT / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf-8")
    for package in ("aiohttp", "attrs", "cattrs", "click", "pluggy", "docker"):
        assert f"| {package} |" in text

"""CLI startup: ``agent-env --version`` and ``agent-env plugin list`` vs ``python -c pass``."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.bars import Bar
from bench.measure import Series, time_command

#: The startup targets: ``--version`` measures about 2.0-2.3x on the reference machine, so 3x
#: leaves it room for noise; ``plugin list`` at most 8x (issue 39, from 12x), with every
#: plugin installed (contributions stay lazy).
BARS = (
    Bar("agent-env --version", at_most=3),
    Bar("agent-env plugin list", at_most=8),
)


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    repeat = 1 if smoke else 10 if quick else 30
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state")}
    floor, floor_rss = time_command([sys.executable, "-c", "pass"], repeat=repeat)
    version, version_rss = time_command([*agent_env, "--version"], repeat=repeat, env=env)
    listing, listing_rss = time_command([*agent_env, "plugin", "list"], repeat=repeat, env=env)
    return [
        Series("python -c pass", floor, peak_rss_mib=floor_rss),
        Series("agent-env --version", version, baseline="python -c pass",
               peak_rss_mib=version_rss),
        Series("agent-env plugin list", listing, baseline="python -c pass",
               peak_rss_mib=listing_rss),
    ]

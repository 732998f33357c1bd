"""``agent-env run hello``: wall time and peak memory vs ``python -c pass``."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.bars import Bar
from bench.measure import Series, time_command

#: 12x is issue 39's target (from 18x, and 40x before); 60 MiB keeps the CLI light enough
#: to run beside many sandboxes.
BARS = (
    Bar("agent-env run hello", at_most=12),
    Bar("agent-env run hello", "peak_rss_mib", at_most=60, unit="MiB"),
)


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    repeat = 1 if smoke else 5 if quick else 15
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-hello")}
    time_command([*agent_env, "run", "hello"], repeat=1, env=env)  # first run writes v1
    floor, _ = time_command([sys.executable, "-c", "pass"], repeat=repeat)
    hello, rss = time_command([*agent_env, "run", "hello"], repeat=repeat, env=env)
    return [
        Series("python -c pass (hello baseline)", floor),
        Series("agent-env run hello", hello, baseline="python -c pass (hello baseline)",
               peak_rss_mib=rss),
    ]

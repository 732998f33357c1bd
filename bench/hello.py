"""``agent-env run hello``: wall time and peak memory vs ``python -c pass``."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.measure import Series, time_command


def run(*, quick: bool, workdir: Path, agent_env: list[str]) -> list[Series]:
    repeat = 5 if quick else 15
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-hello")}
    time_command([*agent_env, "run", "hello"], repeat=1, env=env)  # first run writes v1
    floor, _ = time_command([sys.executable, "-c", "pass"], repeat=repeat)
    hello, rss = time_command([*agent_env, "run", "hello"], repeat=repeat, env=env)
    return [
        Series("python -c pass (hello baseline)", floor),
        Series("agent-env run hello", hello, baseline="python -c pass (hello baseline)", bar=40,
               peak_rss_mib=rss, note="bar: <= 60 MiB peak"),
    ]

"""Episodes of the example todo task: episodes per minute with and without env reuse.

N episodes run side by side (N = 1, 8, 32), each a scripted policy making 10 tool calls through
the env's gateway. A round is N episodes started together and played to their scores; after an
untimed warm-up round (image builds, and the pool's first deploys with reuse) each timed round
gives one sample of episodes per minute. Also measured: the median tool-call latency inside an
episode, and the containers left with the spec's label after every run (must be 0). Sizes over
``MAX_ENVS`` run with ``max_envs=MAX_ENVS`` in both modes: every VM-like docker sandbox takes two
Docker networks, and the daemon's default address pools hold about 30.

Needs Docker. ``python -m bench.episodes [--sizes 1,8,32] [--rounds 2]`` runs it alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.bars import Bar
from bench.measure import Series

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "episodes"
TOOL_CALLS = 10
MAX_ENVS = 12
SIZES = (1, 8, 32)
#: Smoke mode: one round of 1 and of 3 side by side with ``max_envs=2``, so the capped path
#: runs too without 13 sandboxes.
SMOKE_SIZES, SMOKE_MAX_ENVS = (1, 3), 2


def _name(size: int, reuse: bool) -> str:
    return f"episodes/min, {size} side by side, {'reuse' if reuse else 'redeploy'}"


#: Reuse is the point of pooling envs: at least 10x the episodes a fresh deploy each allows.
#: And every run cleans up after itself: no container or network left with the spec's label.
BARS = (
    *(Bar(_name(size, True), at_least=10) for size in SIZES),
    *(Bar(_name(size, reuse), "leaked", at_most=0, unit="")
      for size in SIZES for reuse in (False, True)),
)


async def policy(tools: Any) -> str:
    """Ten calls: two adds, a completion, seven looks at the list."""
    await tools.call("add_item", {"text": "buy milk"})
    await tools.call("add_item", {"text": "walk the dog"})
    listed = await tools.call("list_items", {})
    milk = next(i for i in json.loads(listed["content"][0]["text"])["items"]
                if i["text"] == "buy milk")
    await tools.call("complete_item", {"item_id": milk["id"]})
    for _ in range(TOOL_CALLS - 5):
        await tools.call("list_items", {})
    state = json.loads((await tools.call("list_items", {}))["content"][0]["text"])
    return f"{state['open']} item is still open."


async def play(spec: Any) -> tuple[dict[str, float], list[float]]:
    episode = await spec.start()
    latencies: list[float] = []
    while (turn := await episode.next_turn()) is not None:
        async with turn.tools() as tools:
            reply = await policy(tools)
        latencies.extend(call["seconds"] for call in turn.trajectory)
        await turn.end(response=reply)
    return await episode.result(), latencies


def leaked(spec_id: str) -> int:
    from agent_env.episodes.episode import SPEC_LABEL
    from agentenv_docker_env.engine import docker_client

    label = {"label": f"{SPEC_LABEL}={spec_id}"}
    client = docker_client()
    return (len(client.containers.list(all=True, filters=label))
            + len(client.networks.list(filters=label)))


async def measure(size: int, rounds: int, reuse: bool,
                  max_envs: int = MAX_ENVS) -> tuple[list[float], list[float], int]:
    """(episodes per minute per timed round, tool-call latencies, things leaked)."""
    from agent_env.task import EpisodeSpec, Task

    task = Task.get(Task.from_bundle(EXAMPLE, "todo").id)
    spec = EpisodeSpec.from_task(task, turn_timeout=300, reuse_envs=reuse,
                                 max_envs=max_envs if size > max_envs else None)
    rates: list[float] = []
    latencies: list[float] = []
    async with spec:
        for round_number in range(rounds + 1):
            started = time.perf_counter()
            played = await asyncio.gather(*(play(spec) for _ in range(size)))
            took = time.perf_counter() - started
            for scores, calls in played:
                assert scores == {"list_state": 1.0, "reply": 1.0}, scores
                if round_number:
                    latencies.extend(calls)
            if round_number:  # round 0 warms up
                rates.append(size / took * 60)
    return rates, latencies, leaked(spec.id)


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False,
        sizes: tuple[int, ...] = SIZES, rounds: int = 2) -> list[Series]:
    from agent_env import runtime

    max_envs = MAX_ENVS
    if smoke:
        sizes, rounds, max_envs = SMOKE_SIZES, 1, SMOKE_MAX_ENVS
    os.environ["AGENT_ENV_STATE_DIR"] = str(workdir / "state-episodes")
    runtime.reset()
    series: list[Series] = []
    for size in sizes:
        for reuse in (False, True):
            rates, latencies, left = asyncio.run(measure(size, rounds, reuse, max_envs))
            call_ms = statistics.median(latencies) * 1000
            series.append(Series(
                _name(size, reuse), rates, unit="ep/min",
                baseline=_name(size, False) if reuse else None,
                note=f"tool call median {call_ms:.1f} ms; {left} leaked"
                     + (f"; max_envs={max_envs}" if size > max_envs else ""),
                figures={"leaked": left, "tool_call_median_ms": call_ms}))
    return series


def main() -> int:
    import argparse
    import tempfile

    from bench.__main__ import print_table, report_bars
    from bench.bars import judge_all

    parser = argparse.ArgumentParser(prog="python -m bench.episodes",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-") as tmp:
        series = run(quick=False, workdir=Path(tmp), agent_env=[sys.executable, "-m",
                                                                "agent_env"],
                     sizes=sizes, rounds=args.rounds)
    ran = {s.name for s in series}
    bars = [bar for bar in BARS if bar.series in ran]  # --sizes may differ from SIZES
    print_table(series, bars)
    return 1 if report_bars(judge_all(bars, series)) else 0


if __name__ == "__main__":
    sys.exit(main())

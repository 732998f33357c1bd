"""Episodes at trainer scale, on Docker: a group of 64 side by side, what each env costs, how
fast a reused env turns around, and what the OpenEnv adapter adds to a step.

* **64 side by side**: 64 episodes of the example todo task started together and played to
  their scores (the scripted policy of :mod:`bench.episodes`, 10 tool calls each), with env
  reuse and with a fresh deploy each; ``max_envs`` is ``MAX_ENVS`` in both (the daemon's
  default address pools hold about 30 Docker networks, and each env takes two). An untimed
  round first builds the image and, with reuse, fills the pool. Also judged: nothing is left
  behind, and the process's resident memory after the last round is within ``RSS_GROWTH_MIB``
  of what it was after the first (memory stays bounded as rounds go on).
* **memory per deployed env**: the resident memory (cgroup usage less the page cache) of each
  idle pooled env's containers (gateway, env server and the DNS helper every docker VM has),
  summed per env: the median over the pool's envs, at most ``MEMORY_MIB`` (issue 39: 32 envs
  up at once then fit in 2 GiB). The note splits it by container.
* **turnaround**: one env, episodes one after another: the time from ``episode.result()``
  returning (the env reset and back in the pool) to the next episode's first turn being open
  on that env (``start()`` plus the lend).
* **OpenEnv step**: one tool call (``list_items``) made directly through the turn's tools
  against the same call as an OpenEnv step through ``agentenv_openenv`` (its WebSocket server
  in this process, OpenEnv's ``GenericEnvClient``): medians of ``CALLS`` each, interleaved.
* **reset storm**: ``STORM`` OpenEnv resets in a row on that server, each abandoning the
  episode before it: resets per minute (at least 1,000), the containers up before and after
  (the same), and the process's resident memory growth over the storm.

Needs Docker. ``python -m bench.trainers`` runs it alone.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.bars import Bar
from bench.episodes import EXAMPLE, leaked, play
from bench.measure import Series, resident_mib

GROUP, MAX_ENVS, ROUNDS = 64, 12, 2
SMOKE_GROUP, SMOKE_MAX_ENVS = 4, 2
RSS_GROWTH_MIB = 64
MEMORY_MIB = 60
TURNAROUNDS, CALLS, STORM = 20, 200, 1000
REUSE, REDEPLOY = "episodes/min, group of {n}, reuse", "episodes/min, group of {n}, redeploy"
MEMORY = "memory per idle deployed env (MiB)"
TURNAROUND = "result() to the next episode's first turn on a reused env"
DIRECT, OPENENV = "tool call through the turn's tools", "the same call as an OpenEnv step"
RESETS = "OpenEnv resets in a row (resets/min)"

BARS = (
    Bar(REUSE.format(n=GROUP), at_least=10),
    Bar(REUSE.format(n=GROUP), "leaked", at_most=0, unit=""),
    Bar(REDEPLOY.format(n=GROUP), "leaked", at_most=0, unit=""),
    Bar(REUSE.format(n=GROUP), "rss_growth_mib", at_most=RSS_GROWTH_MIB, unit="MiB"),
    Bar(MEMORY, "median", at_most=MEMORY_MIB, unit="MiB"),
    Bar(OPENENV, "overhead_ms", at_most=2, unit="ms"),
    Bar(RESETS, "median", at_least=1000, unit="/min"),
    Bar(RESETS, "containers_added", at_most=0, unit=""),
    Bar(RESETS, "rss_growth_mib", at_most=RSS_GROWTH_MIB, unit="MiB"),
)


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _task() -> Any:
    from agent_env.task import Task

    return Task.get(Task.from_bundle(EXAMPLE, "todo").id)


async def group_rates(size: int, rounds: int, reuse: bool, max_envs: int
                      ) -> tuple[list[float], int, float, tuple[list[float], dict[str, float]]]:
    """(episodes/min per timed round, things leaked, RSS growth MiB, MiB per idle env and
    the median MiB of each kind of container)."""
    from agent_env.task import EpisodeSpec

    spec = EpisodeSpec.from_task(_task(), turn_timeout=300, reuse_envs=reuse,
                                 max_envs=max_envs)
    rates: list[float] = []
    rss: list[float] = []
    memory: tuple[list[float], dict[str, float]] = ([], {})
    async with spec:
        for round_number in range(rounds + 1):
            started = time.perf_counter()
            played = await asyncio.gather(*(play(spec) for _ in range(size)))
            took = time.perf_counter() - started
            assert all(s == {"list_state": 1.0, "reply": 1.0} for s, _ in played), played
            del played
            gc.collect()
            rss.append(rss_mib())
            if round_number:
                rates.append(size / took * 60)
        if reuse:
            memory = env_memory(spec.id)
    return rates, leaked(spec.id), rss[-1] - rss[1 if len(rss) > 1 else 0], memory


def env_memory(spec_id: str) -> tuple[list[float], dict[str, float]]:
    """MiB of resident memory per env the spec has up (its containers summed by sandbox),
    and the median MiB of each kind of container (gateway, dns, the env server's name)."""
    from agent_env.episodes.episode import SPEC_LABEL
    from agentenv_docker_env.engine import docker_client

    client = docker_client()
    per_env: dict[str, float] = {}
    per_kind: dict[str, list[float]] = {}
    for container in client.containers.list(filters={"label": f"{SPEC_LABEL}={spec_id}"}):
        mib = resident_mib(container)
        sandbox = container.labels.get("agentenv.sandbox", container.name)
        per_env[sandbox] = per_env.get(sandbox, 0.0) + mib
        kind = container.labels.get("agentenv.container", "other")
        per_kind.setdefault(kind, []).append(mib)
    return sorted(per_env.values()), {k: statistics.median(v) for k, v in per_kind.items()}


async def turnarounds(count: int) -> list[float]:
    from agent_env.task import EpisodeSpec

    spec = EpisodeSpec.from_task(_task(), turn_timeout=300, reuse_envs=True)
    samples: list[float] = []
    async with spec:
        returned: float | None = None
        for _ in range(count + 1):
            episode = await spec.start()
            turn = await episode.next_turn()
            assert turn is not None
            if returned is not None:
                samples.append(time.perf_counter() - returned)
            async with turn.tools() as tools:
                await tools.call("list_items", {})
            await turn.end(response="0 items are open.")
            await episode.result()
            returned = time.perf_counter()
        assert spec.pool is not None and spec.pool.deploys == 1, "the env was not reused"
    return samples


async def openenv_costs(calls: int, resets: int
                        ) -> tuple[list[float], list[float], Series]:
    """(direct call seconds, OpenEnv step seconds) interleaved on one deployed env each, then
    the reset storm's series."""
    import uvicorn
    from openenv.core.generic_client import GenericEnvClient

    from agent_env.task import EpisodeSpec
    from agentenv_openenv import build_app

    app = build_app(EXAMPLE, turn_timeout=600, max_concurrent_envs=1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    direct: list[float] = []
    stepped: list[float] = []
    spec = EpisodeSpec.from_task(_task(), turn_timeout=600)
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        async with spec, GenericEnvClient(f"http://127.0.0.1:{port}",
                                          message_timeout_s=300) as client:
            episode = await spec.start()
            turn = await episode.next_turn()
            assert turn is not None
            await client.reset()
            action = {"type": "call_tool", "tool_name": "list_items", "arguments": {}}
            async with turn.tools() as tools:
                for index in range(calls + 10):
                    started = time.perf_counter()
                    await tools.call("list_items", {})
                    middle = time.perf_counter()
                    result = await client.step(action)
                    ended = time.perf_counter()
                    assert result.observation["error"] is None, result.observation
                    if index >= 10:  # the first calls warm connections up
                        direct.append(middle - started)
                        stepped.append(ended - middle)
            await episode.abandon("measured")
            storm = await reset_storm(client, app.state.agentenv, resets)
    finally:
        server.should_exit = True
        await serving
    return direct, stepped, storm


async def reset_storm(client: Any, served: Any, resets: int) -> Series:
    spec = served.splits["all"][0].spec
    for _ in range(10):  # the pool's env and the connection warm up
        await client.reset()
    gc.collect()
    before_rss, before_up = rss_mib(), leaked(spec.id)
    started = time.perf_counter()
    for _ in range(resets):
        reset = await client.reset()
        assert reset.observation["status"] == "ok", reset.observation
    took = time.perf_counter() - started
    gc.collect()
    growth, added = rss_mib() - before_rss, leaked(spec.id) - before_up
    return Series(RESETS, [resets / took * 60], unit="/min",
                  note=f"{resets} resets in {took:.1f} s; {added} containers or networks "
                       f"added; RSS +{growth:.0f} MiB",
                  figures={"containers_added": added, "rss_growth_mib": growth})


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False
        ) -> list[Series]:
    from agent_env import runtime

    os.environ["AGENT_ENV_STATE_DIR"] = str(workdir / "state-trainers")
    runtime.reset()
    size, max_envs, rounds = (SMOKE_GROUP, SMOKE_MAX_ENVS, 1) if smoke else (
        GROUP, MAX_ENVS, ROUNDS)
    series: list[Series] = []
    memory: tuple[list[float], dict[str, float]] = ([], {})
    for reuse in (False, True):
        rates, left, growth, measured = asyncio.run(group_rates(size, rounds, reuse, max_envs))
        memory = measured if measured[0] else memory
        name = (REUSE if reuse else REDEPLOY).format(n=size)
        series.append(Series(
            name, rates, unit="ep/min", baseline=REDEPLOY.format(n=size) if reuse else None,
            note=f"max_envs={max_envs}; {left} leaked; RSS +{growth:.0f} MiB over the rounds",
            figures={"leaked": left, "rss_growth_mib": growth}))
    per_env, per_kind = memory
    split = ", ".join(f"{kind} {mib:.1f}" for kind, mib in sorted(per_kind.items()))
    series.append(Series(MEMORY, per_env, unit="MiB",
                         note=f"{len(per_env)} idle envs; median MiB per container: {split}",
                         figures={f"{kind}_mib": mib for kind, mib in per_kind.items()}))
    series.append(Series(TURNAROUND, asyncio.run(turnarounds(3 if smoke else TURNAROUNDS)),
                         note="one env, episodes one after another"))
    direct, stepped, storm = asyncio.run(openenv_costs(20 if smoke else CALLS,
                                                       20 if smoke else STORM))
    overhead = (statistics.median(stepped) - statistics.median(direct)) * 1000
    series.append(Series(DIRECT, direct))
    series.append(Series(OPENENV, stepped, baseline=DIRECT,
                         note=f"+{overhead:.2f} ms a step over the direct call",
                         figures={"overhead_ms": overhead}))
    series.append(storm)
    return series


def main() -> int:
    import tempfile

    from bench.__main__ import print_table, report_bars
    from bench.bars import judge_all

    with tempfile.TemporaryDirectory(prefix="agentenv-bench-") as tmp:
        series = run(quick=False, workdir=Path(tmp),
                     agent_env=[sys.executable, "-m", "agent_env"])
    print_table(series, list(BARS))
    return 1 if report_bars(judge_all(list(BARS), series)) else 0


if __name__ == "__main__":
    sys.exit(main())

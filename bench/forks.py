"""Forked episode groups against fresh deployments: n episodes that must start from the same
warmed env state (a GRPO group), made two ways, on Docker.

* **forked**: ``spec.start_group(n, warm=...)`` deploys one origin of the example todo env,
  warms it once (``WARM_CALLS`` ``add_item`` calls), takes its ``data/get`` snapshot, and
  starts the n members from copies of it (each member deploys its own env and loads the
  snapshot, checked by digest).
* **fresh**: n ``spec.start()`` episodes, each warming its own env with the same
  ``WARM_CALLS`` calls before it plays.

Then every member plays the same short policy (a look at the list, which must hold the
``WARM_CALLS`` warmed items, and one add). A round is n members started together and played to
their results; an untimed round first builds the image. The figure is groups per minute, forked
against fresh: what forking costs or saves over warming each env itself. With ``WARM_CALLS``
this small, warming is cheap and the fork's extra origin deploy shows; forking pays when the
warm-up is long (a repository cloned, a database seeded). No bar: the issue asks for the
comparison, not a target.

Needs Docker. ``python -m bench.forks [-n 8] [--rounds 3]`` runs it alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.measure import Series

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "episodes"
SIZE, WARM_CALLS = 8, 20
FORKED, FRESH = "group of {n}/min, forked from one warmed env", "group of {n}/min, each warmed"

#: No bar: issue 19 asks for the two side by side.
BARS = ()


async def warm(tools: Any) -> None:
    for index in range(WARM_CALLS):
        await tools.call_tool("add_item", {"text": f"seed-{index}"})


class _McpTools:
    """A member's turn tools under the name the warm function uses (``call_tool``)."""

    def __init__(self, tools: Any) -> None:
        self.tools = tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self.tools.call(name, arguments)


async def play(episode: Any, warm_here: bool) -> None:
    turn = await episode.next_turn()
    assert turn is not None
    async with turn.tools() as tools:
        if warm_here:
            await warm(_McpTools(tools))
        listed = json.loads((await tools.call("list_items", {}))["content"][0]["text"])
        seeded = [i for i in listed["items"] if i["text"].startswith("seed-")]
        assert len(seeded) == WARM_CALLS, listed  # every member starts from the warm state
        await tools.call("add_item", {"text": "mine"})
    await turn.end(response="done")
    while await episode.next_turn() is not None:
        pass


async def warm_origin(env: Any) -> None:
    async with env.mcp() as client:
        await warm(client)


async def one_round(spec: Any, size: int, forked: bool) -> float:
    started = time.perf_counter()
    if forked:
        group = await spec.start_group(size, warm=warm_origin, fork="data")
        await asyncio.gather(*(play(e, False) for e in group.episodes))
        await group.results()
    else:
        episodes = await asyncio.gather(*(spec.start() for _ in range(size)))
        await asyncio.gather(*(play(e, True) for e in episodes))
        await asyncio.gather(*(e.result() for e in episodes))
    return time.perf_counter() - started


async def measure(size: int, rounds: int) -> dict[bool, list[float]]:
    from agent_env.task import EpisodeSpec, Task

    task = Task.get(Task.from_bundle(EXAMPLE, "todo").id)
    rates: dict[bool, list[float]] = {True: [], False: []}
    async with EpisodeSpec.from_task(task, turn_timeout=300) as spec:
        await one_round(spec, 1, False)  # builds the image
        for _ in range(rounds):
            for forked in (False, True):
                rates[forked].append(60 / await one_round(spec, size, forked))
    return rates


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False,
        size: int = SIZE, rounds: int | None = None) -> list[Series]:
    from agent_env import runtime

    if smoke:
        size, rounds = 2, 1
    os.environ["AGENT_ENV_STATE_DIR"] = str(workdir / "state-forks")
    runtime.reset()
    rates = asyncio.run(measure(size, rounds or (2 if quick else 3)))
    note = f"{size} members, {WARM_CALLS} warm-up calls each (fresh) or once (forked)"
    return [Series(FRESH.format(n=size), rates[False], unit="groups/min", note=note),
            Series(FORKED.format(n=size), rates[True], unit="groups/min",
                   baseline=FRESH.format(n=size), note=note)]


def main() -> int:
    import argparse
    import tempfile

    from bench.__main__ import print_table

    parser = argparse.ArgumentParser(prog="python -m bench.forks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=SIZE)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-") as tmp:
        series = run(quick=False, workdir=Path(tmp), agent_env=[sys.executable, "-m",
                                                                "agent_env"],
                     size=args.n, rounds=args.rounds)
    print_table(series, [])
    return 0


if __name__ == "__main__":
    sys.exit(main())

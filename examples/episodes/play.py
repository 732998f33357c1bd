"""Play the todo task from your own loop, with a scripted policy in place of a model.

    python examples/episodes/play.py                 # one episode
    python examples/episodes/play.py -n 8 --reuse    # 8 side by side, envs reset and reused
    python examples/episodes/play.py -n 32 --reuse   # 32, at most --max-envs (12) envs up at once

Needs Docker (the todo env is a container behind a gateway). A trainer's loop is the same with
a model reading ``turn.system_prompt``, ``turn.prompt`` and ``tools.list()``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from agent_env.api import EpisodeSpec, Task

BUNDLE = Path(__file__).resolve().parent


async def scripted_policy(tools) -> str:
    """What a model would do for the todo prompt: two adds, one completion, one look."""
    await tools.call("add_item", {"text": "buy milk"})
    await tools.call("add_item", {"text": "walk the dog"})
    listed = await tools.call("list_items", {})
    items = json.loads(listed["content"][0]["text"])["items"]
    milk = next(item for item in items if item["text"] == "buy milk")
    await tools.call("complete_item", {"item_id": milk["id"]})
    state = json.loads((await tools.call("list_items", {}))["content"][0]["text"])
    return f"Done: {state['open']} item is still open."


async def play_one(spec: EpisodeSpec) -> dict[str, float]:
    episode = await spec.start()
    while (turn := await episode.next_turn()) is not None:
        async with turn.tools() as tools:  # the agent's env tools, called as its role
            reply = await scripted_policy(tools)
        await turn.end(response=reply)
    return await episode.result()  # every score the run recorded, by step id


async def main(count: int, reuse: bool, max_envs: int) -> None:
    task_id = Task.from_bundle(BUNDLE, "todo").id  # stores the bundle's task, as agent-env run does
    spec = EpisodeSpec.from_task(Task.get(task_id), turn_timeout=900, reuse_envs=reuse,
                                 max_envs=max_envs)
    async with spec:  # tears the env pool down at the end
        started = time.perf_counter()
        for scores in await asyncio.gather(*(play_one(spec) for _ in range(count))):
            print(scores)
        print(f"{count} episode(s) in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--episodes", type=int, default=1)
    parser.add_argument("--reuse", action="store_true", help="reset and reuse envs")
    parser.add_argument("--max-envs", type=int, default=12,
                        help="envs up at once (each takes two Docker networks; default 12)")
    args = parser.parse_args()
    asyncio.run(main(args.episodes, args.reuse, args.max_envs))

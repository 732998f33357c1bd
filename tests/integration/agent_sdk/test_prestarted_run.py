"""``PrestartedRun``: the per-prompt process of a Python agent loop (aider, mini-swe-agent) is
started one prompt ahead, so its slow imports are done when the prompt comes; a spare that died
is replaced, and closing kills the one waiting. Real processes."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from agentenv_protocol.agent import PrestartedRun

#: A child that "imports" for a while, then reads its job and says when each happened.
CHILD = """
import json, os, sys, time
started = time.time()
time.sleep(float(os.environ["IMPORT_SECONDS"]))
job = sys.stdin.read()
print(json.dumps({"pid": os.getpid(), "started": started, "job": job,
                  "read": time.time()}), flush=True)
"""


def prestarted(tmp_path: Path, seconds: float) -> PrestartedRun:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return PrestartedRun([sys.executable, str(script)], {"IMPORT_SECONDS": str(seconds)},
                         tmp_path / "work")


async def answer(process: PrestartedRun, job: str) -> dict[str, object]:
    run = await process.take(job)
    events = [event async for event in run.events()]
    assert await run.wait() == 0
    return events[0]


async def test_the_next_prompt_finds_its_process_started(tmp_path: Path) -> None:
    process = prestarted(tmp_path, 1.0)
    await process.start()
    await asyncio.sleep(1.2)  # the agent idles between prompts: the spare finishes importing
    asked = time.time()
    first = await answer(process, "one")
    assert first["job"] == "one" and float(first["started"]) < asked - 1  # type: ignore[arg-type]
    assert time.time() - asked < 0.8  # no import wait
    assert process.spare is not None and process.spare.alive  # the next one is on its way
    await asyncio.sleep(1.2)
    second = await answer(process, "two")
    assert second["job"] == "two" and second["pid"] != first["pid"]
    spare = process.spare
    assert spare is not None
    await process.close()
    assert spare.process.returncode not in (None, 0) and process.spare is None


async def test_a_spare_that_died_is_replaced(tmp_path: Path) -> None:
    process = prestarted(tmp_path, 0.0)
    await process.start()
    assert process.spare is not None
    process.spare.kill()
    await process.spare.wait()
    reply = await answer(process, "after a death")
    assert reply["job"] == "after a death"
    await process.close()


async def test_prompts_side_by_side_each_get_a_process_and_one_spare_is_kept(
        tmp_path: Path) -> None:
    process = prestarted(tmp_path, 0.2)
    replies = await asyncio.gather(*(answer(process, f"job {n}") for n in range(3)))
    assert sorted(str(r["job"]) for r in replies) == ["job 0", "job 1", "job 2"]
    assert len({r["pid"] for r in replies}) == 3
    assert process.spare is not None and process.spare.alive
    await process.close()
    assert json.dumps(replies)  # every reply was one JSON event

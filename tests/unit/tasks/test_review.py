"""The ``review`` step: the run waits for a person's decision, made from another process with
``agent-env task review`` (here: the CLI in this process, on the same stores)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from cli_runner import cli

from agent_env.reviews import reviews
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.step_types.review_steps import Review
from agent_env.tasks.steps import RunChoices

STEPS = [{"type": "review", "id": "gate", "label": "Ship it?", "poll_interval_seconds": 0.05,
          "timeout_seconds": 5}]


def run(steps: list[dict[str, Any]], choices: RunChoices | None = None) -> Any:
    ctx = TaskContext(task_id="t", instance_id="run-1", artifacts=MemoryArtifacts(),
                      choices=choices)
    ctx.outputs["ask"] = {"prompt_id": "ask", "response": "I fixed the order."}
    return asyncio.run(run_task(TaskSpec("t", "tasks/t.json", steps), ctx,
                                registry={"review": Review}, emit=lambda *a, **k: None))


def decide_when_waiting(capsys: Any, *args: str) -> threading.Thread:
    def decide() -> None:
        deadline = time.monotonic() + 5
        while not reviews().awaiting() and time.monotonic() < deadline:
            time.sleep(0.02)
        decide.result = cli(capsys, "task", "review", "--id", "run-1", *args)  # type: ignore

    thread = threading.Thread(target=decide)
    thread.start()
    return thread


def test_an_approval_lets_the_run_go_on(state_root: Any, capsys: Any) -> None:
    thread = decide_when_waiting(capsys, "--approve", "--by", "ana")
    result = run(STEPS)
    thread.join()
    assert result.outcome == "unscored" and result.failures == []
    (found,) = reviews().all()
    assert (found.state, found.decided_by, found.upstream, found.label) == (
        "approved", "ana", "I fixed the order.", "Ship it?")


def test_a_rejection_stops_the_run_with_its_reason(state_root: Any, capsys: Any) -> None:
    thread = decide_when_waiting(capsys, "--reject", "--by", "ana", "--comment", "wrong order")
    result = run(STEPS)
    thread.join()
    (failure,) = result.failures
    assert failure.summary == "review 'gate' was rejected by ana: wrong order"


def test_nobody_deciding_fails_at_the_timeout(state_root: Any) -> None:
    result = run([{**STEPS[0], "timeout_seconds": 0.2}])
    assert result.failures[0].summary == "review 'gate' was not decided within 0.2s"
    assert [r.state for r in reviews().all()] == ["expired"]  # nothing left awaiting


def test_a_stopped_run_leaves_no_review_awaiting(state_root: Any) -> None:
    async def stop_midway() -> None:
        ctx = TaskContext(task_id="t", instance_id="run-1", artifacts=MemoryArtifacts())
        waiting = asyncio.ensure_future(Review(id="gate", poll_interval_seconds=0.05).run(ctx))
        while not reviews().awaiting():
            await asyncio.sleep(0.02)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)

    asyncio.run(stop_midway())
    assert [r.state for r in reviews().all()] == ["cancelled"]


def test_auto_review_decides_without_anyone(state_root: Any) -> None:
    assert run(STEPS, RunChoices(auto_review="approve")).failures == []
    rejected = run(STEPS, RunChoices(auto_review="reject")).failures
    assert rejected[0].summary == "review 'gate' was rejected by auto-review"


def test_the_command_says_what_is_wrong(state_root: Any, capsys: Any) -> None:
    assert cli(capsys, "task", "review", "--list")[1] == "No review awaits a decision.\n"
    code, _, err = cli(capsys, "task", "review", "--id", "run-1", "--approve")
    assert code == 1 and "run run-1 has no review awaiting a decision" in err
    reviews().open("run-1", "gate", "Ship it?", None)
    assert "run-1  gate  since" in cli(capsys, "task", "review", "--list")[1]
    code, _, err = cli(capsys, "task", "review", "--id", "run-1")
    assert code == 1 and "give --id INSTANCE and --approve or --reject" in err
    assert cli(capsys, "task", "review", "--id", "run-1", "--approve", "--by", "bo")[1] == (
        "Review gate of run run-1: approved by bo\n")
    code, _, err = cli(capsys, "task", "review", "--id", "run-1", "--step", "gate", "--reject")
    assert code == 1 and "was already approved by bo" in err

"""``run_container_unit_tests_verifier`` and ``collect_artifacts`` on the local sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_env.evals.verifiers import parse_reward
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.engine import TaskResult, run_task
from agent_env.tasks.plan import TaskSpec
from agent_env.tasks.teardown import Teardown

BOX = {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "local"}


async def run(*steps: dict[str, Any]) -> tuple[TaskResult, TaskContext]:
    teardown = Teardown()
    ctx = TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts(),
                      teardown=teardown)
    try:
        result = await run_task(TaskSpec("t", "t", [BOX, *steps]), ctx)
    finally:
        await teardown.run()
    return result, ctx


def unit_tests(command: str, **extra: Any) -> dict[str, Any]:
    return {"id": "tests", "type": "run_container_unit_tests_verifier", "sandbox_name": "box",
            "test_command": command, **extra}


@pytest.mark.parametrize(("text", "reward"), [("1", 1.0), ("0.25\n", 0.25), ("7", 1.0),
                                              ('{"reward": 0.5}', 0.5), ("-1", 0.0)])
def test_reward_files(text: str, reward: float) -> None:
    assert parse_reward(text) == reward


@pytest.mark.parametrize("text", ["", "pass", '{"score": 1}', "nan", "true"])
def test_unreadable_reward_files(text: str) -> None:
    with pytest.raises(ValueError):
        parse_reward(text)


async def test_the_exit_code_scores_without_a_reward_file(state_root: Path) -> None:
    passed, _ = await run(unit_tests("mkdir -p t && test 1 -eq 1"))
    assert passed.outcome == "passed" and passed.scores == {"tests": 1.0}
    failed, ctx = await run(unit_tests("echo 'assert failed' >&2; exit 2"))
    assert failed.outcome == "scored below 1" and failed.scores == {"tests": 0.0}
    row = ctx.verifications["tests"].results[0]
    assert row.justification == "tests exited 2" and ctx.outputs["tests"]["exit_code"] == 2
    assert "assert failed" in ctx.outputs["tests"]["output_tail"]


async def test_a_reward_file_decides_and_a_bad_one_is_an_error_row(state_root: Path) -> None:
    partial, _ = await run(unit_tests("echo 0.5 > reward.txt; exit 1", reward_file="reward.txt"))
    assert partial.scores == {"tests": 0.5}
    bad, ctx = await run(unit_tests("echo great > reward.txt", reward_file="reward.txt"))
    assert bad.scores == {"tests": 0.0} and bad.outcome == "scored below 1"
    assert ctx.verifications["tests"].results[0].justification.startswith(
        "error: the reward file /app/reward.txt is unreadable")
    absent, _ = await run(unit_tests("true", reward_file="reward.txt"))
    assert absent.scores == {"tests": 1.0}


async def test_collect_artifacts_copies_files_into_the_object_store(state_root: Path) -> None:
    from agent_env.runtime import current

    make = unit_tests("mkdir -p out/logs && echo hi > out/a.txt && echo log > out/logs/b.txt")
    collect = {"id": "collect", "type": "collect_artifacts", "sandbox_name": "box",
               "paths": ["out", "missing.txt", "/app/out/a.txt"], "required": False}
    result, ctx = await run(make, collect)
    assert result.outcome == "passed", result.describe()
    files = ctx.outputs["collect"]["files"]
    assert sorted(files) == ["/app/out/a.txt", "/app/out/logs/b.txt"]
    assert current().object_store.get(files["/app/out/a.txt"]["key"]) == b"hi\n"
    assert ctx.outputs["collect"]["missing"] == ["missing.txt"]
    strict, _ = await run(make, {**collect, "required": True})
    assert strict.outcome == "failed"
    assert "nothing to collect at missing.txt" in strict.describe()


async def test_load_artifact_loads_what_collect_artifacts_collected(state_root: Path) -> None:
    """``artifact_from_step_id``: the collected files land under the destination with their
    paths relative to the folder they were collected from, in another sandbox."""
    make = unit_tests("mkdir -p out/logs && echo hi > out/a.txt && echo log > out/logs/b.txt")
    collect = {"id": "collect", "type": "collect_artifacts", "sandbox_name": "box",
               "base_dir": "/app/out", "paths": ["."], "depends_on": ["tests"]}
    other = {"id": "other", "type": "deploy_sandbox", "sandbox_name": "other",
             "sandbox_type": "local"}
    load = {"id": "load", "type": "load_artifact", "sandbox_name": "other",
            "artifact_from_step_id": "collect", "destination_path": "/app/got",
            "depends_on": ["collect", "other"]}
    check = {"id": "check", "type": "run_container_unit_tests_verifier",
             "sandbox_name": "other", "depends_on": ["load"],
             "test_command": "grep -qx hi got/a.txt && grep -qx log got/logs/b.txt"}
    result, ctx = await run(make, collect, other, load, check)
    assert result.outcome == "passed", result.describe()
    assert sorted(ctx.outputs["load"]["loaded"]) == ["/app/got/a.txt", "/app/got/logs/b.txt"]


def reference_tests(**keys: Any) -> dict[str, Any]:
    """A unit-test verifier as a reference task file spells it, read as ours."""
    from agent_env.evals.verifiers import RunContainerUnitTestsVerifier

    return RunContainerUnitTestsVerifier.adapt({
        "id": "tests", "type": "run_container_unit_tests_verifier", "sandbox_name": "box",
        **keys})


async def test_reference_keys_setup_env_results_and_a_reward_left_behind(
        state_root: Path) -> None:
    stale = unit_tests("echo 1 > reward.txt")  # the agent leaves a perfect score behind
    check = reference_tests(
        command='test "$GREETING" = hi && test -f ready && echo \'{"n": 3}\' > out.json',
        setup_commands=["touch ready"], env_vars={"GREETING": "hi"},
        result_paths=["out.json", "absent.txt"], reward_path="reward.txt", timeout_sec=60,
        depends_on=["stale"])
    stale["id"] = "stale"
    result, ctx = await run(stale, check)
    assert ctx.outputs["tests"]["exit_code"] == 0
    assert ctx.outputs["tests"]["extracted_files"] == {"out.json": {"n": 3}, "absent.txt": None}
    # the stale reward was removed before the tests ran, and they wrote none: 0, not 1
    assert result.scores["tests"] == 0.0
    assert ctx.verifications["tests"].results[0].justification == (
        "tests exited 0; no reward file /app/reward.txt, scored 0")


async def test_a_failing_setup_command_fails_the_step(state_root: Path) -> None:
    result, _ = await run(reference_tests(command="true", setup_commands=["true", "exit 4"]))
    assert result.outcome == "failed"
    assert "setup command 2 of 2 exited 4" in (result.first_fatal.summary if result.first_fatal
                                               else "")


async def test_collect_artifacts_with_reference_keys_seeds_and_exclusions(
        state_root: Path) -> None:
    from agent_env.evals.verifiers import CollectArtifacts

    make = unit_tests("mkdir -p artifact/sub && echo a > artifact/a.txt && "
                      "echo b > artifact/sub/b.txt && echo x > artifact/sub/.DS_Store")
    collect = CollectArtifacts.adapt({"id": "collect", "type": "collect_artifacts",
                                      "sandbox_name": "box", "artifact_paths": ["."],
                                      "exclude_basenames": [".DS_Store"],
                                      "depends_on": ["tests"]})
    assert collect["base_dir"] == "/app/artifact" and collect["paths"] == ["."]
    result, ctx = await run(make, collect)
    assert result.outcome == "passed", result.describe()
    assert sorted(ctx.outputs["collect"]["files"]) == ["/app/artifact/a.txt",
                                                       "/app/artifact/sub/b.txt"]

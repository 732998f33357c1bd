"""What EpisodeSpec.from_task refuses, together, and the prompts it promises (tasks.md 6)."""

from __future__ import annotations

import pytest

from agent_env.task import EpisodeError, EpisodeSpec, Prompt, Task
from agent_env.tasks.records import MemoryInstances


def deploy(name: str, **extra) -> dict:
    return {"id": f"deploy-{name}", "type": "deploy_agent", "agent_name": name, **extra}


def ask(name: str, step_id: str | None = None, **extra) -> dict:
    return {"id": step_id or f"ask-{name}", "type": "prompt_agent", "agent_name": name,
            "prompt": f"Hello {name}", **extra}


def spec(steps: list[dict], **kwargs) -> EpisodeSpec:
    return EpisodeSpec.from_task(Task.from_steps("tasks/x", steps), instances=MemoryInstances(),
                                 **kwargs)


def test_a_task_that_prompts_no_agent() -> None:
    with pytest.raises(EpisodeError) as caught:
        spec([deploy("alice")])
    assert str(caught.value) == "task 'x' prompts no agent"


def test_several_prompted_agents_need_trainer_agents() -> None:
    steps = [deploy("alice"), deploy("bob"), ask("alice"), ask("bob")]
    with pytest.raises(EpisodeError) as caught:
        spec(steps)
    assert str(caught.value) == ("task 'x' prompts ['alice', 'bob']; name the ones to play with "
                                 "trainer_agents=")
    assert spec(steps, trainer_agents=["bob"]).trainer_agents == ("bob",)
    assert spec(steps, trainer_agents="alice").trainer_agents == ("alice",)


def test_everything_an_outside_player_cant_stand_behind_is_reported_together() -> None:
    steps = [
        deploy("alice"),
        ask("alice", retry_config={"max_retries": 2}),
        ask("carol"),
        {"id": "probe", "type": "verify_sandbox", "agent_name": "alice",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "true"}]},
        {"id": "code", "type": "run_code", "script_artifact_id": "@x/y", "agent_name": "alice"},
    ]
    with pytest.raises(EpisodeError) as caught:
        EpisodeSpec.from_task(Task("tasks/x", "x", steps), trainer_agents=["alice", "carol", "dan"])
    assert str(caught.value) == (
        "task 'x' can't run as an episode: "
        "trainer_agents names 'dan', which the task doesn't prompt (it prompts ['alice', "
        "'carol']); "
        "agent 'carol' is prompted but no deploy_agent step deploys it; "
        "step 'ask-alice' has a retry_config that would replay step 'ask-alice' of agent "
        "'alice' (an outside player's turn can't be replayed); "
        "step 'probe' (verify_sandbox) works inside agent 'alice', which an outside player "
        "plays without a container; "
        "step 'code' (run_code) works inside agent 'alice', which an outside player plays "
        "without a container"
    )
    assert len(caught.value.notes) == 5


def test_a_retry_that_replays_no_turn_is_fine_and_a_sandbox_validator_too() -> None:
    steps = [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "work", "sandbox_type": "local"},
        deploy("alice", sandbox_name="work"),
        ask("alice"),
        {"id": "probe", "type": "verify_sandbox", "agent_name": "alice", "sandbox_name": "work",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "true"}],
         "retry_config": {"max_retries": 1}},
    ]
    assert spec(steps).trainer_agents == ("alice",)


def test_prompts_carry_the_seed_the_system_prompt_and_the_deadline() -> None:
    steps = [deploy("alice", system_prompt="You are <who>."),
             ask("alice", "first", prompt="Count to <n>."),
             ask("alice", "second", system_prompt="Now terse.", timeout_seconds=30)]
    made = spec(steps, seed={"who": "a counter", "n": 3})
    assert made.prompts == (
        Prompt("alice", "first", "Count to 3.", "You are a counter.", 600.0),
        Prompt("alice", "second", "Hello alice", "Now terse.", 30.0),
    )
    assert [p.timeout_seconds for p in spec(steps, turn_timeout=5).prompts] == [5.0, 5.0]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"turn_timeout": 0}, "turn_timeout must be a positive number of seconds, not 0"),
    ({"turn_timeout": "9"}, "turn_timeout must be a positive number of seconds, not '9'"),
    ({"seed": 7}, "seed must be a mapping {name: value}"),
    ({"trainer_agents": []}, "trainer_agents is empty; task 'x' prompts ['alice']"),
])
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(EpisodeError) as caught:
        spec([deploy("alice"), ask("alice")], **kwargs)
    assert str(caught.value).startswith(message)


def test_from_task_takes_a_task() -> None:
    with pytest.raises(EpisodeError, match="from_task takes a Task"):
        EpisodeSpec.from_task("my-task")  # type: ignore[arg-type]


def test_task_get_of_nothing_stored_says_how_to_store_one() -> None:
    from agent_env.errors import UserError

    with pytest.raises(UserError, match="no task 'nope' is stored"):
        Task.get("nope")


def test_task_get_reads_what_task_create_stored() -> None:
    from agent_env.runtime import current

    steps = [deploy("alice"), ask("alice")]
    current().versioned_store.put("tasks", "my-task", {"name": "my-task", "steps": steps})
    task = Task.get("my-task")
    assert (task.id, task.version, task.name) == ("my-task", 1, "my-task")
    assert EpisodeSpec.from_task(task).trainer_agents == ("alice",)


@pytest.mark.parametrize(("max_envs", "message"), [
    (0, "max_envs must be a positive whole number, not 0"),
    (1.5, "max_envs must be a positive whole number, not 1.5"),
    (1, "max_envs=1 is less than the 2 envs one episode of task 'x' deploys"),
])
def test_max_envs_must_leave_room_for_one_episode(max_envs: object, message: str) -> None:
    steps = [{"id": "a", "type": "deploy_env", "env_id": "@x/a"},
             {"id": "b", "type": "deploy_env", "env_id": "@x/b"},
             deploy("alice", env_ids=["@x/a", "@x/b"]), ask("alice")]
    with pytest.raises(EpisodeError) as caught:
        EpisodeSpec.from_task(Task("tasks/x", "x", steps), max_envs=max_envs,  # type: ignore[arg-type]
                              instances=MemoryInstances())
    assert str(caught.value) == message
    made = EpisodeSpec.from_task(Task("tasks/x", "x", steps), max_envs=5,
                                 instances=MemoryInstances())
    assert made.env_slots is not None and made.env_slots._value == 2

"""Episodes of a task that needs no env: turns, deadlines, abandon, waiting, side by side.

The slow part some tests need is a local sandbox running ``sleep`` (no Docker).
"""

from __future__ import annotations

import asyncio

import pytest

from agent_env.task import Episode, EpisodeError, EpisodeFailed, EpisodeSpec, Task, Turn
from agent_env.tasks.records import MemoryInstances
from agentenv_agents.steps import read_trajectory


def greet_steps(*, slow: float = 0.0, prompts: int = 1, sandbox: bool = False) -> list[dict]:
    steps: list[dict] = []
    if sandbox or slow:
        steps.append({"id": "box", "type": "deploy_sandbox", "sandbox_name": "work",
                      "sandbox_type": "local"})
    steps.append({"id": "agent", "type": "deploy_agent", "agent_name": "alice",
                  "system_prompt": "Be brief.", **({"sandbox_name": "work"} if sandbox else {})})
    for n in range(1, prompts + 1):
        steps.append({"id": f"ask{n}", "type": "prompt_agent", "agent_name": "alice",
                      "prompt": f"Say hi {n}."})
    steps.append({"id": "reply", "type": "agent_prompt_response_verifier", "prompt_id": "ask1",
                  "criteria": [{"type": "response_contains", "needles": ["hi"]}]})
    if slow:
        steps.append({"id": "slow", "type": "verify_sandbox", "sandbox_name": "work",
                      "criteria": [{"type": "bash_cmd_succeeds",
                                    "bash_cmd": f"sleep {slow}"}]})
    return steps


@pytest.fixture
def instances() -> MemoryInstances:
    return MemoryInstances()


def make_spec(instances: MemoryInstances, **kwargs) -> EpisodeSpec:
    steps = kwargs.pop("steps", None) or greet_steps(
        slow=kwargs.pop("slow", 0.0), prompts=kwargs.pop("prompts", 1),
        sandbox=kwargs.pop("sandbox", False))
    return EpisodeSpec.from_task(Task.from_steps("tasks/greet", steps), instances=instances,
                                 **kwargs)


async def play(episode: Episode, reply: str = "hi there") -> dict[str, float]:
    while (turn := await episode.next_turn()) is not None:
        async with turn.tools() as tools:
            assert tools.list() == []
        await turn.end(response=reply)
    return await episode.result()


async def test_a_scripted_player_gets_the_runs_scores(instances: MemoryInstances) -> None:
    spec = make_spec(instances)
    episode = await spec.start()
    record = instances.get(episode.id)
    assert record is not None and record.status == "running"  # recorded before anything ran
    turn = await episode.next_turn()
    assert isinstance(turn, Turn)
    assert (turn.agent, turn.step_id, turn.prompt, turn.system_prompt) == (
        "alice", "ask1", "Say hi 1.", "Be brief.")
    await turn.end(response="hi!")
    assert await episode.next_turn() is None
    assert await episode.result() == {"reply": 1.0}
    record = instances.get(episode.id)
    assert record is not None
    assert (record.status, record.outcome, record.scores) == ("completed", "passed",
                                                              {"reply": 1.0})
    reply = record.context["outputs"]["ask1"]
    # no tool calls, no trajectory to keep
    assert (reply["response"], reply["agent_trajectory_object_key"]) == ("hi!", None)
    assert record.context["agents"]["alice"]["played_by"] == "outside"
    assert episode.run_result is not None and episode.run_result.scores == {"reply": 1.0}


async def test_a_wrong_reply_scores_zero(instances: MemoryInstances) -> None:
    assert await play(await make_spec(instances).start(), reply="hello") == {"reply": 0.0}


async def test_a_second_end_changes_nothing(instances: MemoryInstances) -> None:
    episode = await make_spec(instances).start()
    turn = await episode.next_turn()
    assert turn is not None
    await turn.end(response="hi")
    await turn.end(response="nope")
    assert turn.response == "hi"
    assert await episode.result() == {"reply": 1.0}


async def test_ending_after_the_deadline_changes_nothing(instances: MemoryInstances) -> None:
    episode = await make_spec(instances, turn_timeout=0.2).start()
    turn = await episode.next_turn()
    assert turn is not None and turn.timeout_seconds == 0.2
    await asyncio.sleep(0.35)
    await turn.end(response="hi")
    assert turn.state == "timed out" and turn.response is None
    with pytest.raises(EpisodeFailed) as caught:
        await episode.next_turn()
    assert "failed at step 'ask1' (prompt_agent): turn 'ask1' of agent 'alice' was " \
           "not ended within 0.2s" in str(caught.value)
    assert caught.value.result.outcome == "failed"
    with pytest.raises(EpisodeFailed):
        await episode.result()
    record = instances.get(episode.id)
    assert record is not None and record.status == "failed"


async def test_result_refuses_while_a_turn_is_open(instances: MemoryInstances) -> None:
    episode = await make_spec(instances).start()
    turn = await episode.next_turn()
    assert turn is not None
    with pytest.raises(EpisodeError) as caught:
        await episode.result()
    assert str(caught.value) == "turn 'ask1' of agent 'alice' isn't ended, so the run can't finish"
    await turn.end(response="hi")
    assert await episode.result() == {"reply": 1.0}


async def test_result_refuses_a_turn_that_opens_while_it_waits(
        instances: MemoryInstances) -> None:
    episode = await make_spec(instances).start()  # nobody asked for the turn yet
    with pytest.raises(EpisodeError, match="turn 'ask1' of agent 'alice' isn't ended"):
        await episode.result()
    await episode.abandon("test over")


async def test_abandon_mid_turn_is_recorded_cancelled_with_the_reason(
        instances: MemoryInstances) -> None:
    episode = await make_spec(instances, sandbox=True).start()
    turn = await episode.next_turn()
    assert turn is not None
    await episode.abandon("policy crashed")
    assert turn.state == "abandoned"
    await turn.end(response="hi")  # nothing to end any more
    with pytest.raises(EpisodeError) as caught:
        await episode.next_turn()
    assert str(caught.value) == "episode abandoned: policy crashed"
    with pytest.raises(EpisodeError, match="episode abandoned: policy crashed"):
        await episode.result()
    with pytest.raises(EpisodeError, match=r"turn 'ask1' of agent 'alice' is over \(abandoned\)"):
        async with turn.tools():
            pass
    record = instances.get(episode.id)
    assert record is not None
    assert (record.status, record.outcome, record.cancel_reason) == (
        "cancelled", "cancelled", "policy crashed")
    report = episode.teardown_report
    assert report is not None and report.count("sandbox") == 1 and report.failed == ()
    await episode.abandon("again")  # after the end: changes nothing
    assert instances.get(episode.id).cancel_reason == "policy crashed"  # type: ignore[union-attr]


async def test_abandon_after_the_run_finished_changes_nothing(
        instances: MemoryInstances) -> None:
    episode = await make_spec(instances).start()
    assert await play(episode) == {"reply": 1.0}
    await episode.abandon("too late")
    assert await episode.result() == {"reply": 1.0}
    assert instances.get(episode.id).status == "completed"  # type: ignore[union-attr]


async def test_cancelling_a_waiting_caller_never_cancels_the_run(
        instances: MemoryInstances) -> None:
    episode = await make_spec(instances, prompts=2, slow=0.4).start()
    first = await episode.next_turn()
    assert first is not None
    waiting = asyncio.ensure_future(episode.next_turn())  # the second turn is not open yet
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await first.end(response="hi")
    second = await episode.next_turn()
    assert second is not None and second.step_id == "ask2"
    await second.end(response="hi again")
    waiting = asyncio.ensure_future(episode.result())  # the slow verifier is still running
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await episode.result() == {"reply": 1.0, "slow": 1.0}


async def test_many_episodes_of_one_spec_side_by_side(instances: MemoryInstances) -> None:
    spec = make_spec(instances, slow=0.2)
    episodes = await asyncio.gather(*(spec.start() for _ in range(12)))
    assert len({e.id for e in episodes}) == 12
    replies = ["hi" if n % 2 else "no" for n in range(12)]
    results = await asyncio.gather(*(play(e, r) for e, r in zip(episodes, replies, strict=True)))
    assert [r["reply"] for r in results] == [1.0 if n % 2 else 0.0 for n in range(12)]
    assert spec.episodes == []


async def test_closing_the_spec_abandons_what_still_runs(instances: MemoryInstances) -> None:
    async with make_spec(instances) as spec:
        episode = await spec.start()
        assert await episode.next_turn() is not None
    assert episode.abandon_reason == "the episode spec was closed"
    assert instances.get(episode.id).status == "cancelled"  # type: ignore[union-attr]
    with pytest.raises(EpisodeError, match="this EpisodeSpec is closed"):
        await spec.start()


async def test_tools_refuse_an_unknown_name_and_offer_bash_in_a_sandbox(
        instances: MemoryInstances) -> None:
    episode = await make_spec(instances, sandbox=True).start()
    turn = await episode.next_turn()
    assert turn is not None
    async with turn.tools() as tools:
        assert [t["name"] for t in tools.list()] == ["bash"]
        with pytest.raises(EpisodeError) as caught:
            await tools.call("nope", {})
        assert str(caught.value) == "turn 'ask1' offers no tool 'nope'; it offers ['bash']"
        ok = await tools.call("bash", {"command": "echo hi > note.txt && cat note.txt"})
        assert ok["isError"] is False and ok["content"][0]["text"].startswith("hi")
        failed = await tools.call("bash", {"command": "exit 3"})
        assert failed["isError"] is True and "(exit 3)" in failed["content"][0]["text"]
    await turn.end(response="hi")
    assert await episode.result() == {"reply": 1.0}
    reply = instances.get(episode.id).context["outputs"]["ask1"]  # type: ignore[union-attr]
    trajectory = read_trajectory(reply["agent_trajectory_object_key"])  # the object store's copy
    assert [(c["tool"], c["is_error"]) for c in trajectory] == [("bash", False), ("bash", True)]


async def test_a_player_nobody_stands_in_for_still_needs_a_model(
        instances: MemoryInstances) -> None:
    steps = [{"id": "a", "type": "deploy_agent", "agent_name": "alice"},
             {"id": "b", "type": "deploy_agent", "agent_name": "bob"},
             {"id": "ask-a", "type": "prompt_agent", "agent_name": "alice", "prompt": "hi"},
             {"id": "ask-b", "type": "prompt_agent", "agent_name": "bob", "prompt": "hi"}]
    episode = await make_spec(instances, steps=steps, trainer_agents=["alice"]).start()
    with pytest.raises(EpisodeFailed, match="agent 'bob' has nothing to run it"):
        await episode.next_turn()


async def test_a_run_that_fails_at_once_still_reports_through_result(
        instances: MemoryInstances) -> None:
    steps = [{"id": "b", "type": "deploy_agent", "agent_name": "bob"},
             {"id": "a", "type": "deploy_agent", "agent_name": "alice"},
             {"id": "ask", "type": "prompt_agent", "agent_name": "alice", "prompt": "hi"}]
    episode = await make_spec(instances, steps=steps).start()
    with pytest.raises(EpisodeFailed, match="agent 'bob' has nothing to run it"):
        await asyncio.wait_for(episode.result(), 5)
    assert episode.state == "finished"

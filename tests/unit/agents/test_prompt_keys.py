"""``prompt_agent`` takes the reference's keys it implements, checks them at preflight, and
refuses by name the ones it does not implement."""

from __future__ import annotations

import pytest

from agent_env.tasks.steps import PreflightView, structure_step
from agentenv_agents.steps import PromptAgent, trajectory_key

VIEW = PreflightView(step_ids=frozenset({"p"}))


def problems(**keys: object) -> list[str]:
    return structure_step(PromptAgent, {"id": "p", **keys}).check(VIEW)


def test_prompt_or_parts_exactly_one() -> None:
    assert problems(prompt="hi") == []
    assert problems(parts=[{"kind": "text", "text": "hi"}]) == []
    both = "give either 'prompt' (text) or 'parts' (A2A parts), not both"
    assert both in problems()
    assert both in problems(prompt="hi", parts=[{"kind": "text", "text": "hi"}])
    assert problems(parts=[{"kind": "image"}]) == [
        "parts[0] must be an A2A part with kind text, data or file"]


def test_the_text_of_parts_is_the_prompt_outside_players_see() -> None:
    step = PromptAgent(id="p", parts=[{"kind": "text", "text": "a"},
                                      {"kind": "data", "data": {}}, {"kind": "text", "text": "b"}])
    assert step.text == "a\nb"


def test_agent_config_holds_only_what_the_step_sets() -> None:
    step = PromptAgent(id="p", prompt="x", max_turns=4, effort="high")
    assert step.agent_config() == {"max_turns": 4, "effort": "high"}


def test_bad_values_are_preflight_problems() -> None:
    assert problems(prompt="x", poll_interval_seconds=0) == [
        "poll_interval_seconds must be in (0, 60]"]
    (problem,) = problems(prompt="x", trajectory_output_prefix="../up/")
    assert problem.startswith("trajectory_output_prefix: invalid object key")


def test_a_reference_key_not_implemented_is_a_problem_saying_why() -> None:
    """Read, never silently ignored: a value this runtime cannot honour is a preflight
    problem; an unknown key is still refused by name."""
    assert problems(prompt="x", user_a2a_url=None, live_trajectory=False,
                    max_conversation_turns=1) == []
    assert problems(prompt="x", user_a2a_url="http://h") == []
    assert problems(prompt="x", user_a2a_url="h:9000") == [
        "user_a2a_url must be an http(s) URL, not 'h:9000'"]
    assert problems(prompt="x", live_trajectory=True)[0].startswith("live_trajectory: ")
    assert problems(prompt="x", max_conversation_turns=0) == [
        "max_conversation_turns must be 1 or more"]
    with pytest.raises(ValueError, match="key 'colour' is not known to 'prompt_agent'"):
        structure_step(PromptAgent, {"id": "p", "prompt": "x", "colour": "red"})


def test_the_trajectory_prefix_is_the_references_layout() -> None:
    assert trajectory_key("run-1", "ask", "agent") == (
        "runs/run-1/prompt_agent_trajectories/prompt_id=ask/trajectory-agent.json")
    assert trajectory_key("run-1", "ask", "agent", "mine/t") == "mine/t/trajectory-agent.json"


def test_who_plays_the_user_url_first_then_agent_then_model_then_the_default_human(
        state_root: object) -> None:
    """``user_a2a_url`` wins; ``[conversations] default_human_a2a_url`` is asked only when
    nobody else would play the user (no user agent deployed, no user model)."""
    import agent_env
    from agent_env.tasks.artifacts import MemoryArtifacts
    from agent_env.tasks.context import TaskContext

    agent_env.configure(conversations={"default_human_a2a_url": "http://hub/human"})
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    ask = PromptAgent(id="p", prompt="x", max_conversation_turns=3)
    assert ask._user_url(ctx) == "http://hub/human"
    assert ask._user_label(ctx) == "at http://hub/human"
    assert PromptAgent(id="p", prompt="x", user_model="scripted:u")._user_url(ctx) is None
    own = PromptAgent(id="p", prompt="x", user_a2a_url="http://me", user_model="scripted:u")
    assert own._user_url(ctx) == "http://me"
    ctx.agents["human_agent"] = object()  # type: ignore[assignment]
    assert ask._user_url(ctx) is None  # the deployed user agent plays it

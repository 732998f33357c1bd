"""deploy_agent without a player fails clearly; the reply verifier's checks and its preflight."""

from __future__ import annotations

from typing import Any

import pytest

from agent_env import runtime
from agent_env.errors import UserError
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.plan import check_steps
from agent_env.tasks.steps import StepError
from agentenv_agents.steps import (
    AgentPromptResponseVerifier,
    DeployAgent,
    PromptAgent,
)

REGISTRY = {cls.type: cls for cls in (DeployAgent, PromptAgent, AgentPromptResponseVerifier)}


def context() -> TaskContext:
    return TaskContext(task_id="t", instance_id="t-12345678", artifacts=MemoryArtifacts())


def with_reply(text: str, prompt_id: str = "ask") -> TaskContext:
    ctx = context()
    ctx.outputs["ask"] = {"prompt_id": prompt_id, "agent_name": "agent", "prompt": "?",
                          "response": text, "trajectory": []}
    return ctx


async def test_deploy_agent_without_a_player_or_model_says_so() -> None:
    with pytest.raises(StepError) as caught:
        await DeployAgent(id="a", agent_name="alice").run(context())
    message = str(caught.value)
    assert ("agent 'alice' has nothing to run it: the step names no a2a_agent_id, no [agents] "
            "default is configured") in message
    assert "agent_env.task.EpisodeSpec" in message


async def test_deploy_agent_of_an_agent_nobody_ships_names_it() -> None:
    runtime.reset()
    with pytest.raises(UserError, match=r"no agent named 'nosuch' \(installed: "):
        await DeployAgent(id="a", a2a_agent_id="nosuch").run(context())


async def test_deploy_agent_needs_its_envs_deployed_first() -> None:
    with pytest.raises(StepError, match="env 'todo' is not deployed in this task"):
        await DeployAgent(id="a", env_ids=["todo"]).run(context())


async def test_prompting_an_agent_nobody_deployed() -> None:
    with pytest.raises(StepError, match="agent 'bob' is not deployed in this task"):
        await PromptAgent(id="p", agent_name="bob", prompt="hi").run(context())


@pytest.mark.parametrize(("criteria", "text", "score"), [
    ([{"type": "response_contains", "needles": ["milk", "dog"]}], "milk and dog", 1.0),
    ([{"type": "response_contains", "needles": ["milk", "cat"]}], "milk and dog", 0.0),
    ([{"type": "response_regex_present", "pattern": r"\b1\b"}], "1 item is open", 1.0),
    ([{"type": "response_regex_present", "pattern": "ONE", "flags": ["IGNORECASE"]}],
     "one is open", 1.0),
    ([{"type": "response_regex_present", "pattern": "ONE"}], "one is open", 0.0),
])
async def test_response_checks(criteria: list[dict[str, Any]], text: str, score: float) -> None:
    ctx = with_reply(text)
    await AgentPromptResponseVerifier(id="v", prompt_id="ask", criteria=criteria).run(ctx)
    assert ctx.verifications["v"].score == score


async def test_sandbox_criteria_in_a_shared_list_are_skipped_rows() -> None:
    ctx = with_reply("done")
    criteria = [{"type": "probe_file_exists", "paths": ["a"]},
                {"type": "response_contains", "needles": ["done"]}]
    await AgentPromptResponseVerifier(id="v", prompt_id="ask", criteria=criteria,
                                      verifier_id="reply").run(ctx)
    verification = ctx.verifications["reply"]
    assert verification.score == 1.0
    assert [row.skipped for row in verification.results] == [True, False]
    assert verification.step_id == "v"


async def test_a_reply_nobody_recorded_is_an_error() -> None:
    with pytest.raises(StepError, match="no reply to prompt 'other' is recorded"):
        await AgentPromptResponseVerifier(
            id="v", prompt_id="other",
            criteria=[{"type": "response_contains", "needles": ["x"]}]).run(with_reply("x"))


def test_preflight_reports_every_bad_criterion() -> None:
    _, problems = check_steps([
        {"id": "a", "type": "deploy_agent"},
        {"id": "p", "type": "prompt_agent", "prompt": "hi", "timeout_seconds": 0},
        {"id": "v", "type": "agent_prompt_response_verifier", "prompt_id": "p", "criteria": [
            {"type": "response_contains"},
            {"type": "response_regex_present", "pattern": "("},
            {"type": "response_regex_present", "pattern": "x", "flags": ["NOPE"]},
            {"type": "vibes"},
        ]},
        {"id": "w", "type": "agent_prompt_response_verifier", "prompt_id": "p"},
    ], REGISTRY)
    assert problems == [
        "step 'p': timeout_seconds must be positive",
        "step 'v': criteria[0] (response_contains) needs 'needles', a list of strings",
        "step 'v': criteria[1]: 'pattern' is not a valid regex "
        "(missing ), unterminated subpattern at position 0)",
        "step 'v': criteria[2]: 'flags' must list re flag names (e.g. [\"IGNORECASE\"])",
        "step 'v': criteria[3]: 'vibes' is not a response check (known: response_contains, "
        "response_regex_present)",
        "step 'w': criteria is empty (give response_contains or response_regex_present checks)",
    ]


class ScriptedPlayer:
    """A TEST DOUBLE for an agent: answers each prompt with the next of ``lines``."""

    def __init__(self, name: str, lines: list[str]) -> None:
        self.name, self.lines, self.heard = name, list(lines), []
        self.settings: list[tuple[Any, Any]] = []

    async def prompt(self, step: Any, timeout: float) -> Any:
        from agent_env.agents import AgentReply, Usage

        self.heard.append((step.text, step.output_format))
        self.settings.append((step.effort, step.context_id))
        return AgentReply(self.lines.pop(0), usage=Usage(model_calls=1))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


async def test_a_user_agent_plays_the_user_until_the_turns_run_out(state_root: Any) -> None:
    """With a deployed user agent (``user_agent_name``) and no ``done``, the conversation runs
    ``max_conversation_turns`` agent turns; the user is asked for ``{message, done}`` JSON and
    a reply that is not JSON is taken as its message."""
    ctx = context()
    agent = ScriptedPlayer("agent", ["one", "two", "three"])
    user = ScriptedPlayer("human_agent", ['{"message": "more", "done": false}', "and more"])
    ctx.agents.update(agent=agent, human_agent=user)
    await PromptAgent(id="ask", prompt="start", max_conversation_turns=3, effort="high",
                      context_id="agent-ctx").run(ctx)
    output = ctx.outputs["ask"]
    assert [t["text"] for t in output["conversation"]] == [
        "start", "one", "more", "two", "and more", "three"]
    assert output["conversation_turns"] == 3 and output["response"] == "three"
    assert output["usage"]["model_calls"] == 3
    assert [text for text, _ in agent.heard] == ["start", "more", "and more"]
    assert [text for text, _ in user.heard] == ["one", "two"]
    assert all(fmt["json_schema"]["name"] == "user_turn" for _, fmt in user.heard)
    # the agent's own settings and conversation never reach the user
    assert set(agent.settings) == {("high", "agent-ctx")} and set(user.settings) == {(None, None)}


async def test_without_a_user_the_conversation_is_one_turn(state_root: Any) -> None:
    ctx = context()
    ctx.agents["agent"] = ScriptedPlayer("agent", ["only"])
    await PromptAgent(id="ask", prompt="start", max_conversation_turns=3).run(ctx)
    assert ctx.outputs["ask"]["conversation_turns"] == 1

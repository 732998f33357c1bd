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

"""The A2A validators' verdicts from what a run recorded: a reply and its trajectory scored, an
extension the card does not declare skipped (not scored at all when nothing applies), and an
agent without a card refused by name. The agent here is a TEST DOUBLE holding only a card; the
Docker tier validates a real one (``a2a-agent validate``)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from agent_env.api import MemoryArtifacts, StepError, TaskContext
from agentenv_agents.a2a_validators import (
    VerifyA2aAgentConfigIdentity,
    VerifyA2aCoreProtocol,
    VerifyA2aSkillConfig,
    VerifyA2aTrajectory,
)


@attrs.define
class CardOnlyAgent:
    """TEST DOUBLE: an A2A agent that is nothing but its card."""

    card: dict[str, Any]
    name: str = "agent"
    url: str = "http://agent.invalid"


def context(card: dict[str, Any], reply: dict[str, Any] | None) -> TaskContext:
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts([]))
    ctx.agents["agent"] = CardOnlyAgent(card)
    if reply is not None:
        ctx.outputs["ask"] = {"prompt_id": "ask", "response": "hi", **reply}
    return ctx


TRAJECTORY_CARD = {"capabilities": {"extensions": [
    {"uri": "https://agentenv.dev/ext/trajectory/v1"}]}}


async def test_core_protocol_scores_a_reply_and_names_an_error() -> None:
    ctx = context({}, {"error_type": None})
    await VerifyA2aCoreProtocol(id="core", prompt_id="ask").run(ctx)
    assert ctx.verifications["core"].score == 1.0
    failed = context({}, {"error_type": "agent_error", "error_message": "the CLI crashed"})
    await VerifyA2aCoreProtocol(id="core", prompt_id="ask").run(failed)
    verdict = failed.verifications["core"]
    assert verdict.score == 0.0
    assert verdict.results[1].justification == "agent_error: the CLI crashed"
    nothing = context({}, None)
    await VerifyA2aCoreProtocol(id="core", prompt_id="ask").run(nothing)
    assert nothing.outputs["core"]["checks"] == {"message/send": "failed", "tasks/get": "failed"}


async def test_a_declared_trajectory_must_be_there_and_an_undeclared_one_is_not_scored() -> None:
    ctx = context(TRAJECTORY_CARD, {"trajectory_events": 0})
    await VerifyA2aTrajectory(id="traj", prompt_id="ask").run(ctx)
    assert ctx.verifications["traj"].score == 0.0
    assert "declares trajectory/v1 but gave no trajectory" in \
        ctx.verifications["traj"].results[0].justification
    good = context(TRAJECTORY_CARD, {"trajectory_events": 5})
    await VerifyA2aTrajectory(id="traj", prompt_id="ask").run(good)
    assert good.verifications["traj"].score == 1.0
    silent = context({}, {"trajectory_events": 0})
    await VerifyA2aTrajectory(id="traj", prompt_id="ask").run(silent)
    assert "traj" not in silent.verifications  # it promised nothing: not a 0
    assert silent.outputs["traj"]["checks"] == {"trajectory": "skipped"}


async def test_identity_and_skills_are_skipped_when_the_card_offers_neither() -> None:
    card = {"capabilities": {"extensions": [{
        "uri": "https://agentenv.dev/ext/agent-config/v1", "params": {"methods": {"set": {
            "request": {"supported": ["model", "system_prompt"]}}}}}]}}
    ctx = context(card, None)
    await VerifyA2aAgentConfigIdentity(id="identity").run(ctx)
    assert ctx.outputs["identity"]["checks"] == {"identity": "skipped"}
    assert "identity" not in ctx.verifications
    await VerifyA2aSkillConfig(id="skills").run(ctx)
    assert ctx.outputs["skills"]["checks"] == {"skill-config": "skipped"}
    assert "skills" not in ctx.verifications


async def test_an_agent_without_a_card_is_refused_by_name() -> None:
    ctx = context({}, None)
    ctx.agents["agent"] = object()
    with pytest.raises(StepError, match="agent 'agent' is not an A2A agent with a card"):
        await VerifyA2aCoreProtocol(id="core", prompt_id="ask").run(ctx)

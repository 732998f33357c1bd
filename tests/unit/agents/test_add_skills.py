"""``add_skills``: what a deployed agent is given, from the reference's skill shapes and from
what earlier loads put in its container. ``SkillTakingAgent`` is a test double for an A2A agent
with skill-config/v1 (the Docker tier gives skills to a real one:
tests/e2e/agents/test_cli_artifacts.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_env.api import PreflightView, StepError
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agentenv_agents.skill_steps import AddSkills


class SkillTakingAgent:
    """Test double: records the entries and versions it is given; takes every name."""

    def __init__(self) -> None:
        self.given: list[Any] = []

    async def give_skills(self, entries: list[dict[str, Any]],
                          versions: dict[str, int] | None = None) -> list[str]:
        self.given.append((entries, versions))
        return [e.get("name") or e["artifact_id"] for e in entries]


def run(step: AddSkills, agent: Any, outputs: dict[str, Any] | None = None) -> TaskContext:
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    ctx.agents["coder"] = agent
    ctx.outputs.update(outputs or {})
    asyncio.run(step.run(ctx))
    return ctx


LOADED = {"install": {"agent_name": "coder", "loaded": [], "artifacts": {"docs": "/work/docs"},
                      "installed_clis": {"slack-cli": {"command_name": "slack",
                                                       "install_path": "/opt/cli/slack/bin/s"}}}}


def test_inline_stored_cli_and_file_skills_reach_the_agent() -> None:
    agent = SkillTakingAgent()
    ctx = run(AddSkills(id="s", agent_name="coder", cli_artifact_ids=["slack-cli"],
                        file_artifact_universe_ids=["docs"], skills=[
                            {"name": "tidy", "description": "Keep it tidy.", "body": "Tidy.",
                             "license": "MIT", "allowed_tools": "Bash"},
                            {"skill_artifact_id": "skills/sums", "skill_artifact_version": 2}]),
              agent, LOADED)
    (entries, versions), = agent.given
    assert entries[0]["skill_md"] == ("---\nname: tidy\ndescription: Keep it tidy.\nlicense: MIT"
                                      "\nallowed-tools: Bash\n---\n\nTidy.\n")
    assert entries[1] == {"artifact_id": "skills/sums"} and versions == {"skills/sums": 2}
    assert entries[2]["name"] == "slack-cli" and "/opt/cli/slack/bin/s --help" in \
        entries[2]["skill_md"]
    assert entries[3]["name"].startswith("docs-") and entries[3]["name"].endswith("-files")
    assert "/work/docs" in entries[3]["description"]
    assert ctx.outputs["s"]["skills"][0] == "tidy"


@pytest.mark.parametrize("step, said", [
    (AddSkills(id="s", agent_name="coder", cli_artifact_ids=["nope"]),
     "cli artifact 'nope' was not installed into agent 'coder'"),
    (AddSkills(id="s", agent_name="coder", file_artifact_universe_ids=["nope"]),
     "artifact 'nope' was not loaded into agent 'coder'"),
])
def test_what_was_not_put_in_the_agent_is_one_line(step: AddSkills, said: str) -> None:
    with pytest.raises(StepError, match=said):
        run(step, SkillTakingAgent(), LOADED)
    with pytest.raises(StepError, match="takes no skills here"):
        run(AddSkills(id="s", agent_name="coder", skills=[{"skill_artifact_id": "a"}]), object())


@pytest.mark.parametrize("skills, said", [
    ([], "names no skill"),
    ([{"name": "x", "description": "d", "object_url": "s3://b/k"}],
     "object_url is not supported here"),
    ([{"name": "x", "description": "d"}], "needs exactly one source"),
    ([{"body": "b"}], "needs a name and a description"),
    ([{"skill_artifact_id": "a", "colour": "red"}], "unknown key(s) colour"),
])
def test_bad_skills_are_preflight_problems(skills: list[Any], said: str) -> None:
    problems = AddSkills(id="s", skills=skills).check(PreflightView(step_ids=frozenset({"s"})))
    assert any(said in p for p in problems), problems

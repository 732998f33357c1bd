"""``rubrics_verifier`` written with the reference's keys, run by ``agent-env run``: a model
judge reading a conversation cut at a turn, and an agent judge this step deploys. Both judges
are the SCRIPTED model (offline), whose ``match`` checks the question each judge was asked:
a check that fails answers HTTP 400 and the run ends as ``error``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentenv_agents.plugin import BUNDLES

from .test_conversation import agent_env

pytestmark = pytest.mark.docker

DIRECT = {"turns": [{
    # what the model judge must see: the reply at turn 1 (not the last one), then the
    # conversation up to there, then the context facts
    "match": {"last_user_contains": "Response:\n6 * 7 is 42.\n\nConversation:\nuser: What is "
                                    "6 * 7?\nagent: 6 * 7 is 42.\n\nContext facts"},
    "text": json.dumps({"results": [
        {"id": "c1", "score": 1, "justification": "it says 42"},
        {"id": "c2", "score": 1, "justification": "it stops at turn one"}]})}]}
AGENT_JUDGE = {"turns": [{
    "match": {"last_user_contains": "Criterion: It answers 7 * 7 correctly."},
    "text": '{"score": 1, "justification": "49 is right"}'}]}

STEPS = [
    {"id": "judges", "type": "scripted_model", "script_artifact_id": "judge_direct"},
    {"id": "agent_judges", "type": "scripted_model", "script_artifact_id": "judge_agent"},
    # the reference's export of a model judge: every key at its value, nulls included
    {"id": "turn_one", "type": "rubrics_verifier", "version": None,
     "depends_on": [{"task_step_id": "answer"}, {"task_step_id": "judges"}],
     "prompt_id": "ask", "verifier_id": "turn_one", "default_model": "scripted:judge_direct",
     "default_model_api_base": None, "score_aggregator": "all_pass", "agent_name": None,
     "trajectory_filter": None, "max_thinking_tokens": None, "effort": None,
     "use_agent_judge": False, "use_trajectory": False, "judge_a2a_agent_id": None,
     "judge_sandbox_type": None, "judge_timeout_seconds": 120, "output_format": "rubric_binary",
     "grading_policy_prompt": "Only the arithmetic counts.",
     "context_facts_for_judge": {"answer check": "verifications.answer.score"},
     "grade_up_to_turn": 1, "run_context_for_judge": ["conversation"], "judge_batch_size": 2,
     "fail_task_on_error": True,
     "criteria": [{"id": "says-42", "criterion": "It says 42."},
                  {"id": "one-turn", "criterion": "It answers one question."}]},
    # an agent judge: the model-agent, deployed by this step and asked the question
    {"id": "by_agent", "type": "rubrics_verifier", "depends_on": ["ask", "agent_judges"],
     "prompt_id": "ask", "verifier_id": "by_agent", "use_agent_judge": True,
     "use_trajectory": False, "judge_a2a_agent_id": "model-agent",
     "judge_sandbox_type": "docker", "default_model": "scripted:judge_agent",
     "output_format": "rubric_binary",
     "criteria": [{"id": "right", "criterion": "It answers 7 * 7 correctly."}]},
]


def test_reference_rubric_keys_run_with_a_model_judge_and_an_agent_judge(
        tmp_path: Path, left_by: Any) -> None:
    bundle = tmp_path / "judged"
    shutil.copytree(BUNDLES / "conversation-smoke", bundle)
    (bundle / "tasks" / "triggered.json").unlink()  # the conversation task alone
    for name, script in (("judge_direct", DIRECT), ("judge_agent", AGENT_JUDGE)):
        (bundle / "artifacts" / name).mkdir()
        (bundle / "artifacts" / name / "script.json").write_text(json.dumps(script))
    task = bundle / "tasks" / "conversation.json"
    task.write_text(json.dumps(json.loads(task.read_text()) + STEPS))

    run = agent_env(tmp_path / "state", "run", str(bundle))
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    scores = re.search(r"tasks/conversation.json v1: passed \((.*?)\)", out)
    assert scores is not None, out
    assert sorted(scores.group(1).split(", ")) == ["answer: 1", "by_agent: 1", "turn_one: 1"]
    assert "deploying the judge agent 'judge-by_agent'" in out
    assert left_by(out) == []

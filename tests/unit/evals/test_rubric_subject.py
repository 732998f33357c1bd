"""What a ``rubrics_verifier`` judge reads, and the reference's keys it is written with.

The judge's answers are tested against a fake judge in tests/integration/evals/test_rubrics.py
and end to end (scripted model, agent judge) in tests/e2e/agents/test_rubric_judges.py; here
only the question it is asked, built from a recorded conversation, trajectory and verification.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_env.evals.rubrics import RubricsVerifier, render_trajectory
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.scores import ScoreRow
from agent_env.tasks.steps import PreflightView, structure_step

CONVERSATION = [{"role": "user", "text": "What is 6 * 7?"}, {"role": "agent", "text": "42."},
                {"role": "user", "text": "And 7 * 7?"}, {"role": "agent", "text": "49."},
                {"role": "user", "text": "Thanks.", "done": True}]
TRAJECTORY = [{"type": "prompt", "text": "What is 6 * 7?"},
              {"type": "thinking", "text": "multiply"},
              {"type": "tool_call", "tool": "calc", "arguments": {"a": 6}, "result": "x" * 5000},
              {"type": "answer", "text": "42."}]


@pytest.fixture
def ctx(state_root: Any) -> TaskContext:
    from agent_env.runtime import current

    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    key = "runs/t-1/trajectory-agent.json"
    current().object_store.put(key, json.dumps(TRAJECTORY).encode(), allow_overwrite=True)
    ctx.outputs["ask"] = {"prompt_id": "ask", "prompt": "What is 6 * 7?", "response": "49.",
                          "conversation": CONVERSATION, "agent_trajectory_object_key": key}
    step = structure_step(RubricsVerifier, {"id": "answer", "criteria": [{"criterion": "c"}],
                                            "text": "x"})
    ctx.record_verification(step, "answer", [ScoreRow(0, 1.0, True, "ok")], "weighted_average")
    return ctx


def verifier(**keys: Any) -> RubricsVerifier:
    raw = RubricsVerifier.adapt({"id": "judge", "prompt_id": "ask",
                                 "criteria": [{"criterion": "It multiplies."}], **keys})
    step = structure_step(RubricsVerifier, raw)
    assert isinstance(step, RubricsVerifier)
    return step


def test_by_default_the_judge_reads_the_prompt_and_the_last_reply_only(ctx: TaskContext) -> None:
    text = verifier()._subject(ctx).text()
    assert text == "Prompt:\nWhat is 6 * 7?\n\nResponse:\n49."


def test_grade_up_to_turn_cuts_the_reply_and_the_conversation(ctx: TaskContext) -> None:
    text = verifier(grade_up_to_turn=1, run_context_for_judge=["conversation"])._subject(
        ctx).text()
    assert "Response:\n42.\n" in text
    assert text.endswith("Conversation:\nuser: What is 6 * 7?\nagent: 42.")
    assert "49" not in text
    # a turn past the end grades the whole conversation
    whole = verifier(grade_up_to_turn=5, run_context_for_judge=["conversation"])._subject(ctx)
    assert whole.response == "49." and "user: Thanks." in whole.text()


def test_the_trajectory_is_shown_as_the_filter_says(ctx: TaskContext) -> None:
    text = verifier(use_trajectory=True)._subject(ctx).text()
    trajectory = text.split("Agent trajectory:\n")[1]
    assert '[tool_call] {"tool": "calc"' in trajectory
    assert "[thinking]" not in trajectory  # include_thinking is off by default
    assert "x" * 2000 + "…" in trajectory and "x" * 2001 not in trajectory
    lean = verifier(use_trajectory=True, trajectory_filter={
        "include_tool_call_results": False, "include_thinking": True, "compaction_type": "default",
        "screenshot_last_n": 3})._subject(ctx).text()
    assert "[thinking]" in lean and "xxx" not in lean
    # the run's --no-trajectory-filter shows all of it, whatever the step's filter says
    from agent_env.tasks.steps import RunChoices

    ctx.choices = RunChoices(trajectory_filter=False)
    whole = verifier(use_trajectory=True, trajectory_filter={
        "include_tool_call_results": False})._subject(ctx).text()
    assert "[thinking]" in whole and "xxx" in whole


def test_context_facts_and_the_policy_follow_the_reply(ctx: TaskContext) -> None:
    text = verifier(context_facts_for_judge={"answer check": "verifications.answer.score",
                                             "missing": "outputs.nope.x"},
                    grading_policy_prompt="  Only arithmetic counts.  ")._subject(ctx).text()
    assert text.endswith("- answer check: 1.0\n- missing: (not available)\n\n"
                         "Grading policy:\nOnly arithmetic counts.")


def test_the_reference_spellings_are_read_as_ours() -> None:
    step = verifier(default_model="judge-9", judge_timeout_seconds=30, use_agent_judge=False)
    assert (step.judge_model, step.timeout_seconds) == ("judge-9", 30)
    assert render_trajectory([], {"include_tool_calls": True, "include_tool_call_results": True,
                                  "include_response": True, "include_thinking": False}) \
        == "(the trajectory is empty)"


def test_a_screenshot_in_the_trajectory_is_named_not_shown_as_base64() -> None:
    flags = {"include_tool_calls": True, "include_tool_call_results": True,
             "include_response": True, "include_thinking": False}
    shot = {"mime_type": "image/png", "data": "iVBORw0KGgo" * 500}
    text = render_trajectory([{"type": "tool_result", "name": "computer_screenshot",
                               "images": [shot]}], flags)
    assert text == ('[tool_result] {"name": "computer_screenshot", '
                    '"images": ["image/png image"]}')


@pytest.mark.parametrize(("keys", "problem"), [
    ({"output_format": "rubric_evidence"}, "cite screenshot frames"),
    ({"judge_batch_size": 0}, "judge_batch_size must be 1 or more"),
    ({"default_model_api_base": "http://x"}, "set the upstream with [model] base_url"),
    ({"max_thinking_tokens": 100}, "takes no thinking budget"),
    ({"agent_name": "judge"}, "set use_agent_judge: true too"),
    ({"use_agent_judge": True, "agent_name": "a", "judge_a2a_agent_id": "b"}, "not both"),
    ({"use_trajectory": True, "grade_up_to_turn": 2}, "not per turn"),
    ({"run_context_for_judge": ["trigger_log"]}, "no env here records trigger firings"),
    ({"trajectory_filter": {"include_tool_calls": True}}, "set use_trajectory: true too"),
    ({"use_trajectory": True, "trajectory_filter": {"compaction_type": "screenshot"}},
     "only 'default' is supported"),
    ({"use_trajectory": True, "trajectory_filter": {"bogus": 1}}, "key 'bogus' is not known"),
    ({"context_facts_for_judge": {"x": "a..b"}}, "give a dotted path"),
])
def test_keys_that_cannot_be_honoured_are_preflight_problems(keys: dict[str, Any],
                                                             problem: str) -> None:
    problems = verifier(**keys).check(PreflightView(frozenset({"judge"})))
    assert any(problem in p for p in problems), problems


def test_a_text_rubric_takes_no_reply_keys() -> None:
    step = structure_step(RubricsVerifier, {"id": "j", "text": "hi", "use_trajectory": True,
                                            "criteria": [{"criterion": "c"}]})
    assert any("give prompt_id" in p for p in step.check(PreflightView(frozenset({"j"}))))


def test_an_agent_judge_with_no_agent_to_deploy_is_a_problem_before_the_run(
        state_root: Any) -> None:
    from agent_env.tasks.steps import RunChoices

    needs = verifier(use_agent_judge=True).needs(RunChoices())
    assert needs == ["use_agent_judge: no agent to judge with: set judge_a2a_agent_id (or "
                     "[agents] default), name a deployed one with agent_name, or set "
                     "use_agent_judge: false"]
    assert verifier(use_agent_judge=True, agent_name="judge").needs(RunChoices()) == []

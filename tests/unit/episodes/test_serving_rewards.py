"""A served task's reward from its scores: the mean by default, one step's score, or a function."""

from __future__ import annotations

import pytest

from agent_env.episodes.serving import reward_function
from agent_env.episodes.task_source import Task as EpisodeTask
from agent_env.errors import UserError

SCORING = ("state", "reply")
TASK = EpisodeTask("@b/todo", "todo", [{"id": "ask", "type": "prompt_agent"},
                                       {"id": "state", "type": "env_outcome_verifier"},
                                       {"id": "reply", "type": "agent_prompt_response_verifier"}])


def test_by_default_the_reward_is_the_mean_of_the_scores() -> None:
    reward = reward_function(TASK, None, SCORING)
    assert reward({"state": 1.0, "reply": 0.0}) == 0.5
    assert reward({"state": 0.25}) == 0.25
    assert reward({}) is None  # a run that recorded no score has no reward


def test_a_step_id_makes_that_steps_score_the_reward() -> None:
    reward = reward_function(TASK, "state", SCORING)
    assert reward({"state": 0.0, "reply": 1.0}) == 0.0
    with pytest.raises(LookupError, match=r"no score at step 'state' \(it recorded \['reply'\]\)"):
        reward({"reply": 1.0})


def test_a_step_that_records_no_score_is_refused_before_any_episode() -> None:
    with pytest.raises(UserError) as caught:
        reward_function(TASK, "ask", SCORING)
    assert str(caught.value) == ("reward='ask': task 'todo' records no score at a step 'ask' "
                                 "(it records them at state, reply)")


def test_a_function_of_the_scores_is_used_as_it_is() -> None:
    reward = reward_function(TASK, lambda scores: scores["reply"] * 2, SCORING)
    assert reward({"reply": 1.0}) == 2.0

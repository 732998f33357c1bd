"""The ``run`` a ``verify(mcp_url, run)`` script gets: the graded prompt's turns."""

from __future__ import annotations

import pytest

from agentenv_mcp_env.run_context import RunRecordUnavailable, run_of


def test_one_prompt_is_one_turn_and_a_conversation_is_its_turns() -> None:
    run = run_of({"prompt_id": "ask", "agent_name": "agent", "prompt": "hi", "response": "hello"})
    assert [(t.number, t.message.text, t.reply.text if t.reply else None) for t in run.turns] \
        == [(1, "hi", "hello")]
    assert run.turn(1).reply is not None and run.turn(1).reply.author == "agent"
    run = run_of({"prompt_id": "ask", "response": "b", "conversation": [
        {"role": "user", "text": "1"}, {"role": "agent", "text": "a"},
        {"role": "user", "text": "2", "done": True}]})
    assert [(t.message.text, t.reply and t.reply.text) for t in run.turns] == [
        ("1", "a"), ("2", None)]
    with pytest.raises(LookupError, match="the run has no turn 3"):
        run.turn(3)


def test_what_was_not_recorded_raises_naming_the_record() -> None:
    nothing = run_of(None)
    with pytest.raises(RunRecordUnavailable, match="conversation: no prompt was answered"):
        _ = nothing.turns
    assert run_of({"prompt": "p", "response": "r"}).firings() == ()
    with pytest.raises(RunRecordUnavailable, match="env:mail: no firing log was captured"):
        run_of({"prompt": "p", "response": "r"}).firings(env="mail")

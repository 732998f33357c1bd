"""``register_env_triggers`` at preflight: what the gateway would refuse is said before any env
is deployed, with the trigger and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from agent_env.api import PreflightView
from agentenv_mcp_env.trigger_steps import RegisterEnvTriggers

VIEW = PreflightView(step_ids=frozenset({"t"}), entities={"envs": frozenset({"desk"})})
TIME = {"type": "time", "at": "PT1M"}
NOTE = {"type": "tool", "tool": "post_note", "args": {"text": "hi"}}


def problems(**keys: Any) -> list[str]:
    return list(RegisterEnvTriggers(id="t", env_id="desk", **keys).check(VIEW))


def test_a_good_registration_has_no_problems() -> None:
    assert problems(triggers=[{"id": "a", "when": TIME, "actions": [NOTE]}],
                    await_fired=["a"]) == []
    assert problems(executor_agent_name="bob", triggers=[
        {"id": "a", "when": {"type": "action", "tool": "send"},
         "actions": [{"type": "nl", "instruction": "Answer ${args.to}"}]}]) == []


@pytest.mark.parametrize(("keys", "says"), [
    ({"triggers": []}, "non-empty list"),
    ({"triggers": [{"id": "a", "when": {"type": "website"}, "actions": [NOTE]}]},
     "when.type must be one of ['action', 'time']"),
    ({"triggers": [{"id": "a", "when": TIME, "actions": [
        {"type": "nl", "instruction": "x"}]}]}, "executor '(default)' is not registered"),
    ({"triggers": [{"id": "a", "when": TIME, "actions": [NOTE]}], "await_fired": ["b"]},
     "await_fired names ['b']"),
    ({"triggers": [{"id": "a", "when": TIME, "actions": [NOTE]}],
      "executor_hours": {"bob": {}}}, "executor_hours"),
    ({"triggers": [{"id": "a", "when": {"type": "time", "at": "tomorrow"},
                    "actions": [NOTE]}]}, "RFC 3339"),
    ({"triggers": [{"id": "a", "when": {"type": "action", "tool": "x",
                                        "where": {"to": {"regex": "b"}}},
                    "actions": [NOTE]}]}, "args.<path> or result.<path>"),
])
def test_bad_registrations_are_refused_at_preflight(keys: dict[str, Any], says: str) -> None:
    found = problems(**keys)
    assert any(says in p for p in found), found


def test_what_this_gateway_does_not_serve_is_refused_by_name() -> None:
    found = problems(executor_agent_name="bob", triggers=[
        {"id": "a", "when": TIME, "actions": [{"type": "nl", "instruction": "x",
                                               "delay": "PT5M"}]}])
    assert any("not ['delay']" in p for p in found), found
    found = problems(triggers=[{"id": "a", "when": {"type": "time", "at": "PT1M",
                                                    "every": "PT1H"}, "actions": [NOTE]}])
    assert any("not ['every']" in p for p in found), found

"""Issue 31, class 17: the model-agent's agent-config refuses counts and durations it cannot
honour (``max_turns -1`` used to be taken, and then no turn ran)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import agentenv_agents
from agentenv_protocol.agent.extensions import ConfigState
from agentenv_protocol.errors import AgentEnvError

AGENT = Path(agentenv_agents.__file__).parent / "agents" / "model-agent" / "agent.py"


def model_agent_config() -> type:
    spec = importlib.util.spec_from_file_location("model_agent_under_test", AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ModelAgentConfig


@pytest.mark.parametrize("body, field", [
    ({"max_turns": -1}, "max_turns"), ({"max_turns": 0}, "max_turns"),
    ({"timeout_seconds": 0}, "timeout_seconds"), ({"timeout_seconds": float("inf")}, "finite"),
])
def test_bad_counts_and_durations_are_refused(body: dict, field: str) -> None:
    state = ConfigState(model_agent_config())
    with pytest.raises(AgentEnvError) as refused:
        state.set(body)
    assert refused.value.status == 400
    assert field in str(refused.value)
    assert state.readback() == {}  # nothing of it stuck
    state.set({"max_turns": 3, "timeout_seconds": 30})
    assert state.snapshot().max_turns == 3

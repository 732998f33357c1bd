"""``agent-env run conversation-smoke``: a multi-turn conversation between the model-agent and a
simulated user, both played by the SCRIPTED model, offline; the record keeps both sides."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def agent_env(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state)}
    for name in ("AGENT_ENV_CONFIG", "AGENT_ENV_MODEL_BASE_URL", "AGENT_ENV_MODEL_API_KEY"):
        env.pop(name, None)
    return subprocess.run([str(AGENT_ENV), *args], capture_output=True, text=True, env=env,
                          timeout=600, check=False)


def test_a_simulated_user_answers_until_it_is_done(tmp_path: Path, left_by: Any) -> None:
    run = agent_env(tmp_path, "run", "conversation-smoke")
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/conversation.json v1: passed (answer: 1)" in out
    assert ("the user (simulated by scripted:user_script) said: Thanks. And what is 7 * 7?"
            in out)
    assert "said: That is all I needed. (and ended the conversation)" in out
    assert left_by(out) == []

    instance = re.search(r"instance (\S+)", out.split("Tasks:")[1]).group(1)
    shown = agent_env(tmp_path, "task", "get-instance", "--id", instance)  # as the reference
    assert shown.returncode == 0, shown.stderr
    assert agent_env(tmp_path, "task", "get-instance", instance).stdout == shown.stdout
    ask = json.loads(shown.stdout)["context"]["outputs"]["ask"]
    assert [(t["role"], t["text"]) for t in ask["conversation"]] == [
        ("user", "What is 6 * 7?"), ("agent", "6 * 7 is 42."),
        ("user", "Thanks. And what is 7 * 7?"), ("agent", "7 * 7 is 49."),
        ("user", "That is all I needed.")]
    assert ask["conversation"][-1]["done"] is True
    assert ask["conversation_turns"] == 2 and ask["response"] == "7 * 7 is 49."
    assert ask["usage"]["model_calls"] == 2  # the agent's two turns, summed

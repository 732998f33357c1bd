"""``agent-env run conversation-smoke``: a multi-turn conversation between the model-agent and a
simulated user, both played by the SCRIPTED model, offline (or the user scripted by its
triggers/v1 triggers); the record keeps both sides."""

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

    # tasks/triggered.json: the user is an agent whose registered triggers script its turns
    assert "tasks/triggered.json v1: passed (answer: 1)" in out
    assert "the user (agent 'user') said: And what is 7 * 7?" in out
    assert "said: Thanks, that is all. (and ended the conversation)" in out
    instance = re.search(r"tasks/triggered.json v1: passed .* instance (\S+)", out).group(1)
    shown = agent_env(tmp_path, "task", "get-instance", "--id", instance)
    ask = json.loads(shown.stdout)["context"]["outputs"]["ask"]
    assert ask["agent_trigger_firings"] == [
        {"turn": 2, "fired": ["follow-up"], "done": False},
        {"turn": 3, "fired": ["thanks"], "done": True}]
    assert ask["usage"]["model_calls"] == 2  # only the agent's: no model played the user


def test_a_user_reached_over_a2a_answers_in_the_conversations_own_thread(
        tmp_path: Path, left_by: Any) -> None:
    """``user_a2a_url``: the user is an agent served elsewhere (here a process of the agent
    SDK on this machine), asked over A2A; nothing is deployed for it."""
    import shutil
    import socket
    import time

    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "over-a2a"
    shutil.copytree(BUNDLES / "conversation-smoke", bundle)
    (bundle / "tasks" / "triggered.json").unlink()  # the conversation task alone
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    task = bundle / "tasks" / "conversation.json"
    steps = [s for s in json.loads(task.read_text()) if s["id"] != "user_model"]
    for step in steps:
        step["depends_on"] = [d for d in step.get("depends_on") or [] if d != "user_model"]
        if step["id"] == "ask":
            del step["user_model"]
            step["user_a2a_url"] = f"http://127.0.0.1:{port}"
    task.write_text(json.dumps(steps))
    log = tmp_path / "user.log"
    user = subprocess.Popen([sys.executable, str(Path(__file__).with_name("a2a_user_agent.py")),
                             str(port)], env={**os.environ, "USER_AGENT_LOG": str(log)})
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        run = agent_env(tmp_path / "state", "run", str(bundle))
    finally:
        user.terminate()
        user.wait(10)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/conversation.json v1: passed (answer: 1)" in out
    url = f"http://127.0.0.1:{port}"
    assert f"the user (at {url}) said: Thanks. And what is 7 * 7?" in out
    assert f"the user (at {url}) said: That is all I needed. (and ended the conversation)" \
        in out
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s["text"] for s in seen] == ["6 * 7 is 42.", "7 * 7 is 49."]
    assert len({s["context"] for s in seen}) == 1  # one thread for the whole conversation
    assert left_by(out) == []

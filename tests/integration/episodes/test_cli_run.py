"""``agent-env run`` of a task that prompts an agent, with no one to play it: a clear failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

STEPS = [
    {"id": "agent", "type": "deploy_agent", "agent_name": "alice"},
    {"id": "ask", "type": "prompt_agent", "agent_name": "alice", "prompt": "Say hi."},
    {"id": "reply", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
     "criteria": [{"type": "response_contains", "needles": ["hi"]}]},
]


def test_run_fails_without_an_agent_to_deploy_and_fakes_nothing(tmp_path: Path) -> None:
    bundle = tmp_path / "ask-bundle"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "tasks" / "ask.json").write_text(json.dumps(STEPS))
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    for name in ("AGENT_ENV_CONFIG", "AGENT_ENV_MODEL_BASE_URL"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "agent_env", "run", str(bundle)], cwd=tmp_path,
                          env=env, text=True, capture_output=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "tasks/ask.json v1: failed at step 'agent': agent 'alice' has nothing " \
           "to run it: the step names no a2a_agent_id" in done.stdout
    assert "passed" not in done.stdout

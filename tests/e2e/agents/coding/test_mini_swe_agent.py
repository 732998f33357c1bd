"""``agent-env run mini-swe-agent-smoke``: mini-swe-agent (pinned from PyPI) runs its own loop
offline with the SCRIPTED model through the run's model gateway, reaches the echo env's tool
through the ``mcp-call`` command, and submits; the run record keeps its messages as the
trajectory. A loop that hits its step limit without submitting is an agent error naming it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentenv_agents.plugin import BUNDLES

from ..test_conversation import agent_env

pytestmark = pytest.mark.docker
SMOKE = BUNDLES / "mini-swe-agent-smoke"


def outputs_of(state: Path, out: str) -> dict[str, Any]:
    instance = re.search(r"instance (\S+)", out).group(1)  # type: ignore[union-attr]
    shown = agent_env(state, "task", "get-instance", instance)
    assert shown.returncode == 0, shown.stderr
    return dict(json.loads(shown.stdout)["context"]["outputs"])


def test_the_smoke_bundle_passes_and_keeps_the_loop_as_trajectory(
        tmp_path: Path, left_by: Any) -> None:
    from agent_env.stores.filesystem import FilesystemObjectStore

    state = tmp_path / "state"
    run = agent_env(state, "run", "mini-swe-agent-smoke")
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/smoke.json v1: passed (answer: 1, echoes: 1)" in out, out
    assert re.search(r"agents/mini-swe-agent: 'mini' answered \(completed\) with model "
                     r"scripted:mini_script: 2 model call\(s\), \d+ input \+ \d+ output "
                     r"tokens, 2 tool call\(s\)", out), out
    assert left_by(out) == []
    outputs = outputs_of(state, out)
    assert outputs["agent"]["network_policy"] == "sealed"
    reply = outputs["ask"]
    assert reply["response"] == "The echo tool returned: mini smoke 2207"
    events = json.loads(FilesystemObjectStore(state / "objects").get(
        reply["agent_trajectory_object_key"]))
    assert events[0] == {"type": "agentenv.format", "format": "mini-swe-agent/1"}
    assert (events[1]["type"], events[1]["cli"], events[1]["version"]) == (
        "agentenv.cli", "mini-swe-agent", "2.4.6")
    actions = [a["command"] for e in events if e.get("type") == "mini.message"
               for a in e.get("actions") or ()]
    assert actions[0] == "mcp-call echo '{\"text\": \"mini smoke 2207\"}'"
    results = [e["content"] for e in events
               if e.get("type") == "mini.message" and e.get("role") == "tool"]
    assert "mini smoke 2207" in str(results[0])  # the env's answer, through mcp-call
    (ended,) = [e for e in events if e.get("type") == "mini.exit"]
    assert ended["exit_status"] == "Submitted"


def test_a_loop_that_never_submits_is_an_agent_error(tmp_path: Path, left_by: Any) -> None:
    bundle = tmp_path / "stuck"
    shutil.copytree(SMOKE, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    script = bundle / "artifacts" / "mini_script" / "script.json"
    script.write_text(json.dumps({"name": "mini_script", "turns": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo still looking"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo still looking"}}]}]}))
    task = bundle / "tasks" / "smoke.json"
    steps = [s for s in json.loads(task.read_text()) if s["id"] != "echoes"]
    for step in steps:
        if step["id"] == "ask":
            step["max_turns"] = 2
    task.write_text(json.dumps(steps))
    state = tmp_path / "state"
    run = agent_env(state, "run", str(bundle))
    out = run.stdout
    assert "tasks/smoke.json v1: scored below 1 (answer: 0)" in out, out + run.stderr
    assert "mini-swe-agent stopped without submitting: LimitsExceeded" in out
    reply = outputs_of(state, out)["ask"]
    assert reply["error_type"] == "agent_error"
    assert "mini-swe-agent stopped without submitting: LimitsExceeded" in reply["error_message"]
    assert reply["usage"]["model_calls"] == 2  # max_turns reached it as its step limit
    assert left_by(out) == []

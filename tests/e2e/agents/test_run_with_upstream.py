"""``agent-env run agents-smoke --model NAME`` against an OpenAI-compatible endpoint: the
model-agent is driven by that endpoint (not the scripted model) through the echo env to a score,
the model gateway forwards with the configured key, and the record's token counts are the ones
the endpoint reported.

The endpoint is a TEST DOUBLE (no model runs on these machines): ``ToolCallingFake`` speaks
Chat Completions over real HTTP, asks for the echo tool with the quoted text of the prompt,
then answers with what the tool returned. Everything between it and the CLI is real: the model
gateway container, the agent container, the echo env, Docker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_models import KEY, MODEL, USAGE, ToolCallingFake

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")
def test_model_points_the_model_agent_at_an_openai_compatible_endpoint(
        tmp_path: Path, upstream: tuple[ToolCallingFake, str], left_by: Any) -> None:
    fake, base_url = upstream
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    # the reference's variable for extra upstream headers: the gateway sends them on
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), E2E_UPSTREAM_KEY=KEY,
               LITELLM_EXTRA_HEADERS='{"X-Team": "rl-7"}')
    config = tmp_path / "config.toml"
    config.write_text(f'[model]\nbase_url = "{base_url}"\napi_key = "env:E2E_UPSTREAM_KEY"\n')
    run = subprocess.run(
        [str(AGENT_ENV), "--config", str(config), "run", "agents-smoke", "--model", MODEL,
         "--json"], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(run.stdout)
    (row,) = result["runs"]
    assert (row["outcome"], row["scores"]) == ("passed", {"answer": 1.0, "echoes": 1.0})
    assert result["summary"]["errors"] == 0
    # the endpoint, not the scripted model, drove the agent: two turns, asked for MODEL
    assert [r["model"] for r in fake.requests] == [MODEL, MODEL]
    assert fake.requests[1]["messages"][-1]["content"] == "agents smoke 7431"
    assert [h.get("X-Team") for h in fake.headers] == ["rl-7", "rl-7"]
    assert left_by(run.stderr) == []

    shown = subprocess.run([str(AGENT_ENV), "--config", str(config), "task", "get-instance",
                            row["instance_id"]],
                           capture_output=True, text=True, env=env, timeout=60, check=True)
    reply = json.loads(shown.stdout)["context"]["outputs"]["ask"]
    assert reply["model"] == MODEL and reply["error_type"] is None
    # the gateway's counts are the endpoint's own numbers, summed over the two calls
    assert reply["usage"] == {"tool_calls": 1, "model_calls": 2,
                              "input_tokens": 2 * USAGE["prompt_tokens"],
                              "output_tokens": 2 * USAGE["completion_tokens"], "cost_usd": None}
    assert KEY not in shown.stdout and KEY not in run.stdout + run.stderr

    # --litellm-api-key gives one run the key [model] does not have (the fake refuses others)
    keyless = tmp_path / "keyless.toml"
    keyless.write_text(f'[model]\nbase_url = "{base_url}"\n')
    again = subprocess.run(
        [str(AGENT_ENV), "--config", str(keyless), "task", "run", "--id", row["task_id"],
         "--model", MODEL, "--litellm-api-key", "env:E2E_UPSTREAM_KEY"],
        capture_output=True, text=True, env=env, timeout=600, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(fake.requests) == 4  # two more calls, both let in by the fake
    assert KEY not in again.stdout + again.stderr

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

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")
KEY = "sk-e2e-upstream-key-0b7e"
MODEL = "fake-tool-model"
USAGE = {"prompt_tokens": 123, "completion_tokens": 17, "total_tokens": 140}


class ToolCallingFake:
    """TEST DOUBLE of an OpenAI-compatible model server (see the module docstring)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def complete(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return web.json_response({"error": {"message": "bad key", "type": "auth"}},
                                     status=401)
        body = await request.json()
        self.requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            message = {"role": "assistant", "content": f"The echo tool returned: {last['content']}"}
            finish = "stop"
        else:
            quoted = re.search(r"'([^']+)'", last["content"])
            tool = next(t["function"]["name"] for t in body.get("tools") or []
                        if "echo" in t["function"]["name"])
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(self.requests)}", "type": "function",
                "function": {"name": tool,
                             "arguments": json.dumps({"text": quoted.group(1) if quoted else ""})},
            }]}
            finish = "tool_calls"
        return web.json_response({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body["model"], "usage": USAGE,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]})


@pytest.fixture
def upstream(docker_client: Any) -> Iterator[tuple[ToolCallingFake, str]]:
    """The fake on all interfaces of this host, and its URL as containers reach it (the
    default bridge's gateway address)."""
    fake = ToolCallingFake()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.complete)
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "0.0.0.0", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    host = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]["Gateway"]
    try:
        yield fake, f"http://{host}:{port}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_model_points_the_model_agent_at_an_openai_compatible_endpoint(
        tmp_path: Path, upstream: tuple[ToolCallingFake, str], left_by: Any) -> None:
    fake, base_url = upstream
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), E2E_UPSTREAM_KEY=KEY)
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

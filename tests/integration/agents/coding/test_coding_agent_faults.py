"""The aider, claude-code, codex, gemini, opencode, openhands and pi agents when things go
wrong, on the real engine with the real CLIs.

The echo env of the claude-code-smoke bundle is deployed by ``deploy_env``; the agent joins its
sandbox next to the ``model-gateway`` container serving the SCRIPTED model. A model that never
answers (``delay_seconds``) makes the prompt time out: the task is cancelled and the CLI process
must be gone from the agent container. A model that refuses (a script whose check fails: HTTP
400) makes the CLI fail: the prompt fails as ``agent_error`` carrying the refusal. Images are
the ones the smoke bundles build (content-hash tags: found, not rebuilt).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest

from agent_env.tasks.context import TaskContext
from agent_env.tasks.steps import StepError
from agentenv_agents.steps import PromptAgent

pytestmark = pytest.mark.docker
#: the command line of the process each agent runs per prompt (pi and the Gemini CLI are Node
#: scripts; aider and openhands run in a child of the agent's own Python, ``agent.py --episode``)
CLIS = {"aider": r"agent\.py --episode$", "claude-code": r"^\S*claude ", "codex": r"^\S*codex ",
        "gemini": r"^\S*node ", "opencode": r"^\S*opencode ",
        "openhands": r"agent\.py --episode$", "pi": r"^\S*node "}
#: Agents whose per-prompt process is started one prompt ahead (PrestartedRun): while a prompt
#: runs, the next one's process waits beside it, and stays when the prompt is cancelled.
PRESTARTED = {"aider", "openhands"}
#: Lists the container's processes as [pid, start time, command line] (the image has Python,
#: not ps; the start time is /proc/PID/stat's 22nd field, in clock ticks since boot).
PROCESSES = ("import os, json; print(json.dumps([[int(p), int(open(f'/proc/{p}/stat').read()"
             ".rsplit(')', 1)[1].split()[19]), open(f'/proc/{p}/cmdline', 'rb').read()"
             ".decode(errors='replace').replace(chr(0), ' ')] for p in os.listdir('/proc') "
             "if p.isdigit()]))")


def cli_processes(docker_client: Any, run_id: str, cli: str) -> list[tuple[int, int, str]]:
    """(pid, start time, command line) of the agent container's processes whose command line
    matches the pattern ``cli``, oldest first."""
    (container,) = docker_client.containers.list(filters={"label": [
        f"agentenv.run={run_id}", "agentenv.role=agent"]})
    result = container.exec_run(["python", "-c", PROCESSES])
    assert result.exit_code == 0, result.output
    return sorted((pid, start, line) for pid, start, line in json.loads(result.output)
                  if re.search(cli, line.strip()))


@pytest.mark.parametrize("agent", sorted(CLIS))
async def test_a_prompt_that_times_out_stops_the_cli(
        agent: str, task: tuple[TaskContext, dict[str, str]], deploy: Any,
        docker_client: Any, run_id: str) -> None:
    ctx, ids = task
    await deploy(ctx, ids, agent, {"hung": {"turns": [{"delay_seconds": 600, "text": "late"}]}})
    prompt = asyncio.create_task(PromptAgent(id="ask", agent_name=agent, prompt="hello",
                                             model="scripted:hung", timeout_seconds=6).run(ctx))
    deadline = time.monotonic() + 6
    running: list[tuple[int, int, str]] = []
    while time.monotonic() < deadline and not running:  # the CLI is waiting on the model
        running = await asyncio.to_thread(cli_processes, docker_client, run_id, CLIS[agent])
        await asyncio.sleep(0.3)
    assert running, f"no {CLIS[agent]} process seen while the prompt ran"
    # the prompt's own: all of them, or for a prestarted agent the oldest (the next prompt's
    # process was started after it)
    prompts = {pid for pid, _, _ in (running[:1] if agent in PRESTARTED else running)}
    started = time.monotonic()
    with pytest.raises(StepError, match="did not answer within 6s"):
        await prompt
    assert time.monotonic() - started < 8
    left = running
    for _ in range(20):  # cancelled: the agent kills the CLI's process group
        left = await asyncio.to_thread(cli_processes, docker_client, run_id, CLIS[agent])
        if not prompts & {pid for pid, _, _ in left}:
            break
        await asyncio.sleep(0.25)
    assert not prompts & {pid for pid, _, _ in left}, left
    assert len(left) == (1 if agent in PRESTARTED else 0), left  # only the next one's waits


@pytest.mark.parametrize("agent", sorted(CLIS))
async def test_a_cli_that_fails_fails_the_prompt_as_agent_error(
        agent: str, task: tuple[TaskContext, dict[str, str]], deploy: Any) -> None:
    ctx, ids = task
    refusing = {"turns": [{"match": {"last_user_contains": "never said"}, "text": "no"}]}
    await deploy(ctx, ids, agent, {"refusing": refusing})
    started = time.monotonic()
    try:
        await PromptAgent(id="ask", agent_name=agent, prompt="hello", model="scripted:refusing",
                          timeout_seconds=120).run(ctx)
    except StepError as exc:
        message = str(exc)
    else:
        reply = ctx.outputs["ask"]
        assert reply["error_type"] == "agent_error"
        message = reply["error_message"]
    assert time.monotonic() - started < 60
    # the scripted model's refusal reached the agent's error, through the CLI
    assert "expected the latest user message to contain 'never said'" in message, message


@pytest.mark.parametrize("agent", sorted(CLIS))
async def test_a_model_that_answers_429_then_500_is_retried_and_recorded(
        agent: str, task: tuple[TaskContext, dict[str, str]], deploy: Any) -> None:
    from agent_env.runtime import current

    ctx, ids = task
    flaky = {"turns": [{"fail_first": [429, 500], "text": "answered after two retries"}]}
    await deploy(ctx, ids, agent, {"flaky": flaky})
    started = time.monotonic()
    await PromptAgent(id="ask", agent_name=agent, prompt="hello", model="scripted:flaky",
                      timeout_seconds=120).run(ctx)
    reply = ctx.outputs["ask"]
    assert reply["error_type"] is None, reply
    assert "answered after two retries" in reply["response"]
    events = json.loads(current().object_store.get(reply["agent_trajectory_object_key"]))
    statuses = [c["status"] for c in events[-1]["model_calls"]]
    # the CLI's own client retried: both failures are in the prompt's record, then the answer
    assert statuses[-3:] == [429, 500, 200], statuses
    print(f"\n{agent}: two retried failures took {time.monotonic() - started:.1f}s")

"""An agent written with the REFERENCE's SDK, deployed and prompted by OUR kernel.

``reference_agent/`` installs the reference's protocol package from PyPI
(``agentenv-framework-protocol[agent]==0.1.379``) at image build time and serves a trivial agent
with its ``@a2a_agent`` framework (uvicorn ``a2a_server:app`` on ``A2A_PORT``). Our
``deploy_agent`` builds that folder (content-hash tag: built once, then found), runs it next to
the echo env through the docker sandbox, hands it the env over ``mcp-config`` and a system
prompt over ``agent-config``; ``prompt_agent`` talks ``message/send`` + ``tasks/get`` (+
``tasks/cancel`` on timeout) to it and reads its trajectory; ``agent_prompt_response_verifier``
scores the reply; two envs behind one gateway and the token (checked by the agent's front, as
the reference's server takes none) are tested too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from agent_env.tasks.context import TaskContext
from agent_env.tasks.step_types.env_steps import DeployEnv
from agent_env.tasks.steps import StepError
from agentenv_agents.steps import (
    AgentPromptResponseVerifier,
    DeployAgent,
    PromptAgent,
    read_trajectory,
)

pytestmark = pytest.mark.docker
AGENT_ID = "reference-test-agent"
TEXT = "hello reference 5127"
#: What the fixture agent reports as its usage (it calls no model).
INPUT_TOKENS, OUTPUT_TOKENS = 11, 7


async def ask(ctx: TaskContext, step_id: str, prompt: str, timeout: float = 30) -> dict[str, Any]:
    await PromptAgent(id=step_id, prompt=prompt, timeout_seconds=timeout).run(ctx)
    reply: dict[str, Any] = ctx.outputs[step_id]
    return reply


async def test_a_reference_sdk_agent_is_deployed_prompted_and_scored(
    task: tuple[TaskContext, dict[str, str]], leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    started = time.monotonic()
    await DeployEnv(id="deploy", env_id=ids["echo"], sandbox_type="docker").run(ctx)
    await DeployAgent(id="agent", a2a_agent_id=AGENT_ID, env_ids=[ids["echo"]],
                      system_prompt="answer plainly").run(ctx)
    described = ctx.outputs["agent"]
    # the card the reference's framework serves was read (/.well-known/agent.json)
    assert described["card_name"] == "reference-test-agent"
    assert described["agent"] == AGENT_ID and described["type"] == "a2a"

    # message/send (non-blocking) + tasks/get: the reply, the env it got over mcp-config (with
    # the deployment's token: the echo tool answered), the system prompt over agent-config
    reply = await ask(ctx, "ask", f"echo {TEXT}")
    assert reply["response"] == "\n".join([
        f"reference agent got: echo {TEXT}",
        "system prompt: answer plainly",
        "mcp server echo: tools echo",
        f"echo returned: {TEXT}",
    ])
    assert reply["error_type"] is None and reply["error_message"] is None
    # the usage data part of the reference's final message is what our record keeps
    assert reply["tool_call_count"] == 1
    assert reply["usage"]["input_tokens"] == INPUT_TOKENS
    assert reply["usage"]["output_tokens"] == OUTPUT_TOKENS
    assert reply["usage"]["model_calls"] == 0  # it never called the model gateway

    # trajectory/v1 cursor reads (/ext/trajectory with after/limit) of the reference's log
    events = read_trajectory(reply["agent_trajectory_object_key"])
    assert events[:4] == [
        {"type": "agentenv.format", "format": "reference-test/1"},
        {"type": "prompt", "text": f"echo {TEXT}"},
        {"type": "tool_call", "server": "echo", "tool": "echo", "result": TEXT},
        {"type": "answer", "text": reply["response"]},
    ]
    assert events[-1]["type"] == "agentenv.usage" and events[-1]["state"] == "completed"

    await AgentPromptResponseVerifier(id="score", prompt_id="ask", criteria=[
        {"type": "response_contains", "needles": [f"echo returned: {TEXT}"]},
        {"type": "response_regex_present", "pattern": r"^reference agent got: echo "},
    ]).run(ctx)
    assert ctx.verifications["score"].score == 1.0

    # a prompt's own system prompt goes over agent-config before its message/send
    await PromptAgent(id="own", prompt="hi", system_prompt="this prompt's").run(ctx)
    assert ctx.outputs["own"]["response"] == ("reference agent got: hi\n"
                                              "system prompt: this prompt's\n"
                                              "mcp server echo: http://gateway:18765/mcp")

    # a failed task (TaskResult.failure): agent_error with the reference's code and message
    failed = await ask(ctx, "fail", "fail")
    assert failed["error_type"] == "agent_error"
    assert failed["error_message"] == "reference.asked_to_fail: asked to fail"
    await AgentPromptResponseVerifier(id="fail-score", prompt_id="fail", criteria=[
        {"type": "response_contains", "needles": ["asked to fail"]}]).run(ctx)
    assert ctx.verifications["fail-score"].score == 0.0

    # past timeout_seconds our step sends tasks/cancel; the reference cancels the running
    # coroutine (a task left running would hold the context's lock and delay the next prompt)
    with pytest.raises(StepError, match=r"did not answer within 1s \(task \S+ cancelled\)"):
        await ask(ctx, "slow", "sleep 30", timeout=1)
    before = time.monotonic()
    after_cancel = await ask(ctx, "after", "cancelled?", timeout=10)
    assert after_cancel["response"].splitlines()[1] == "cancelled while running: 1"
    assert time.monotonic() - before < 3

    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []
    print(f"\nreference agent: deploy + 5 prompts + teardown in "
          f"{time.monotonic() - started:.1f}s")


async def test_two_envs_behind_one_gateway_reach_a_reference_sdk_agent(
    task: tuple[TaskContext, dict[str, str]],
) -> None:
    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["echo"], with_envs=[ids["slow"]],
                    sandbox_type="docker").run(ctx)
    # one gateway serves both envs: the agent is given it once (the reference refuses a second
    # server with the same URL, with HTTP 409)
    await DeployAgent(id="agent", a2a_agent_id=AGENT_ID,
                      env_ids=[ids["echo"], ids["slow"]]).run(ctx)
    reply = await ask(ctx, "ask", f"echo {TEXT}")
    assert f"echo returned: {TEXT}" in reply["response"]


# The reference's server takes no token: the agent's front (agent_front.py) checks it.
async def test_a_reference_sdk_agents_published_port_wants_the_token(
    task: tuple[TaskContext, dict[str, str]],
) -> None:
    import aiohttp

    ctx, _ = task
    await DeployAgent(id="agent", a2a_agent_id=AGENT_ID, sandbox_type="docker").run(ctx)
    async with aiohttp.ClientSession() as http, http.post(
            ctx.outputs["agent"]["url"] + "/a2a", json={
                "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}) as resp:
        assert resp.status == 401

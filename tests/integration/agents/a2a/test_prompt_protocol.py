"""How the ``a2a`` type talks to an agent while a prompt runs, against SDK agents served here
(no containers): the reply, the poll cadence, and a timeout that cancels the task."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import attrs
import pytest

from agent_env.tasks.steps import StepError
from agentenv_agents.a2a_type import A2aAgent
from agentenv_agents.steps import PromptAgent
from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    TRAJECTORY_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
    create_app,
)
from agentenv_protocol.testing import serve_app


@attrs.define
class SlowConfig(AgentConfig):
    model: str | None = None
    max_turns: int | None = None
    effort: str | None = None


@a2a_agent(identity=AgentIdentity(name="slow"), config=SlowConfig,
           extensions=(AGENT_CONFIG_V1, TRAJECTORY_V1))
class SlowAgent(AgentEnvAgent):
    """Sleeps the seconds its prompt says, then names the model it was configured with."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def run(self, request: TaskRequest[SlowConfig]) -> TaskResult:
        request.trajectory.set_format("slow/1")
        request.trajectory.append({"type": "slept", "seconds": float(request.text)})
        try:
            await asyncio.sleep(float(request.text))
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        request.usage.add_tool_call(1)
        self.seen = (request.config, request.context_id, request.text)
        return TaskResult(text=f"slept with {request.config.model}")


class NoCalls:
    upstream = None
    image = "none"

    async def calls(self, after: int = 0) -> list[dict[str, Any]]:
        return []

    async def count(self) -> int:
        return 0


class Notes:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def note(self, line: str) -> None:
        self.lines.append(line)


async def agent_at(url: str, notes: Notes) -> A2aAgent:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(f"{url}/.well-known/agent.json") as r:
        card = await r.json()
    return A2aAgent("slow", "slow", url, "agent-slow", "img", "m1", card, None, NoCalls(), notes)


async def test_a_prompt_is_polled_finely_and_its_trajectory_read() -> None:
    notes = Notes()
    async with serve_app(create_app(SlowAgent())) as server:
        agent = await agent_at(server.url, notes)
        started = time.monotonic()
        reply = await agent.prompt(PromptAgent(id="p", prompt="0.3", model="m2"), 30)
    assert time.monotonic() - started < 1.5  # polled every 0.2 s, not every 2 s
    assert reply.response == "slept with m2"
    assert reply.trajectory[0] == {"type": "agentenv.format", "format": "slow/1"}
    assert reply.trajectory[1] == {"type": "slept", "seconds": 0.3}
    assert reply.usage.tool_calls == 1 and reply.error_type is None
    assert "'slow' answered (completed) with model m2" in notes.lines[-1]


class Polls:
    """Seconds from the last ``message/send`` to each ``tasks/get`` after it (the a2a type's
    RPC wrapped for the test)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent = 0.0
        self.times: list[float] = []
        real = A2aAgent._rpc

        async def rpc(agent: A2aAgent, http: Any, method: str, params: dict[str, Any],
                      **options: Any) -> Any:
            if method == "message/send":
                self.sent, self.times = time.monotonic(), []
            elif method == "tasks/get":
                self.times.append(time.monotonic() - self.sent)
            return await real(agent, http, method, params, **options)

        monkeypatch.setattr(A2aAgent, "_rpc", rpc)


async def test_the_default_poll_starts_fine_and_grows_to_five_a_second(monkeypatch) -> None:
    """A quick answer is seen within tens of milliseconds; a long task is not polled at that
    rate all along (waits of 0.02 s growing by half to 0.2 s); a step's own interval stays."""
    polls = Polls(monkeypatch)
    async with serve_app(create_app(SlowAgent())) as server:
        agent = await agent_at(server.url, Notes())
        await agent.prompt(PromptAgent(id="p", prompt="1.0"), 30)
        times = polls.times
        assert 0.02 <= times[0] < 0.15, times
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps[0] < 0.15 and max(gaps) >= 0.19, gaps  # grew to the steady wait
        assert 7 <= len(times) <= 12, times  # 0.02 s throughout would be 50
        reply = await agent.prompt(PromptAgent(id="q", prompt="0"), 30)
        assert reply.response == "slept with m1" and len(polls.times) <= 3, polls.times
        await agent.prompt(PromptAgent(id="r", prompt="0.5", poll_interval_seconds=0.3), 30)
        assert polls.times[0] >= 0.3 and len(polls.times) <= 3, polls.times


async def test_a_prompt_past_its_timeout_is_cancelled_and_fails() -> None:
    sdk_agent = SlowAgent()
    async with serve_app(create_app(sdk_agent)) as server:
        agent = await agent_at(server.url, Notes())
        started = time.monotonic()
        with pytest.raises(StepError, match=r"did not answer within 1s \(task \S+ cancelled\)"):
            await agent.prompt(PromptAgent(id="p", prompt="30"), 1)
        assert time.monotonic() - started < 3
        for _ in range(50):
            if sdk_agent.cancelled:
                break
            await asyncio.sleep(0.05)
    assert sdk_agent.cancelled == 1


async def test_a_prompt_that_sets_what_the_agent_cannot_take_fails() -> None:
    async with serve_app(create_app(SlowAgent())) as server:
        agent = await agent_at(server.url, Notes())
        with pytest.raises(StepError, match=r"cannot take system_prompt \(its agent-config "
                                            r"supports: .*model"):
            await agent.prompt(PromptAgent(id="p", prompt="0", system_prompt="be brief"), 5)


async def test_the_reference_prompt_keys_reach_the_agent_over_agent_config() -> None:
    """max_turns and effort go over agent-config (the card takes them); parts and context_id
    make the A2A message; the reply records the context it answered in. (timeout_seconds is
    AgentEnv's to enforce: it cancels the task, so the agent is not told.)"""
    sdk_agent = SlowAgent()
    async with serve_app(create_app(sdk_agent)) as server:
        agent = await agent_at(server.url, Notes())
        step = PromptAgent(id="p", parts=[{"kind": "text", "text": "0"}], max_turns=3,
                           effort="low", context_id="ctx-7", poll_interval_seconds=0.05)
        reply = await agent.prompt(step, 30)
    config, context_id, text = sdk_agent.seen
    assert (config.max_turns, config.effort) == (3, "low")
    assert (context_id, text, reply.context_id) == ("ctx-7", "0", "ctx-7")


async def test_a_key_the_agent_cannot_take_is_an_error_naming_it() -> None:
    async with serve_app(create_app(SlowAgent())) as server:
        agent = await agent_at(server.url, Notes())
        with pytest.raises(StepError, match=r"cannot take max_thinking_tokens, output_format "
                                            r"\(its agent-config supports: "):
            await agent.prompt(PromptAgent(id="p", prompt="0", max_thinking_tokens=9,
                                           output_format={"type": "json"}), 5)

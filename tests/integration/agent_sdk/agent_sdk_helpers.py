"""Agents and raw-HTTP helpers for the A2A agent SDK tests.

``EchoAgent`` is a plain ``async def run`` agent steered by the prompt ("sleep:2",
"fail", "empty", ...); ``StreamAgent`` is an async-generator agent. Both record what each turn
saw, so tests can check what the runtime configured reached the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import attrs

from agentenv_protocol.agent import (
    MCP_CONFIG_V1,
    TRAJECTORY_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    AgentSkill,
    Artifact,
    Progress,
    TaskRequest,
    TaskResult,
    a2a_agent,
    write_only,
)
from agentenv_protocol.parts import TextPart
from agentenv_protocol.testing import RunningServer


@attrs.define
class EchoConfig(AgentConfig):
    model: str | None = None
    max_turns: int = 3
    api_key: str | None = write_only()


@attrs.define
class Turn:
    """What one run saw and when it ran (monotonic seconds)."""

    task_id: str
    context_id: str
    text: str
    start: float
    end: float | None = None
    config: Any = None
    mcp_servers: dict[str, Any] = attrs.field(factory=dict)
    cancelled: bool = False


@a2a_agent(
    identity=AgentIdentity(
        name="echo", description="Echoes the prompt; steered by it.", version="1.2.3",
        input_modes=["text/plain"], output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="echo", name="Echo", description="repeats", tags=["test"])],
    ),
    config=EchoConfig,
    extensions=(MCP_CONFIG_V1, TRAJECTORY_V1),
)
class EchoAgent(AgentEnvAgent):
    """Commands: ``sleep:<s>``, ``events:<n>``, ``fail``, ``empty``, ``refuse``, ``ask``,
    ``badtype``; anything else is echoed back."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.active: dict[str, int] = {}
        self.max_active: dict[str, int] = {}

    async def run(self, request: TaskRequest[EchoConfig]) -> TaskResult:
        turn = Turn(request.task_id, request.context_id, request.text, time.monotonic(),
                    config=request.config, mcp_servers=dict(request.mcp_servers))
        self.turns.append(turn)
        ctx = request.context_id
        self.active[ctx] = self.active.get(ctx, 0) + 1
        self.max_active[ctx] = max(self.max_active.get(ctx, 0), self.active[ctx])
        try:
            return await self._answer(request)
        except asyncio.CancelledError:
            turn.cancelled = True
            raise
        finally:
            self.active[ctx] -= 1
            turn.end = time.monotonic()

    async def _answer(self, request: TaskRequest[EchoConfig]) -> TaskResult:
        text = request.text
        request.trajectory.set_format("echo-events/1")
        request.trajectory.append({"type": "prompt", "text": text})
        if text.startswith("sleep:"):
            await asyncio.sleep(float(text.split(":", 1)[1]))
        elif text.startswith("events:"):
            for i in range(int(text.split(":", 1)[1])):
                request.trajectory.append({"type": "step", "i": i})
        elif text == "fail":
            raise RuntimeError("the model exploded")
        elif text == "empty":
            return TaskResult()
        elif text == "refuse":
            return TaskResult.failure("I will not do that", code="echo.refused")
        elif text == "ask":
            return TaskResult(text="which one?", input_required=True)
        elif text == "badtype":
            return "not a TaskResult"  # type: ignore[return-value]
        request.usage.add_tool_call(2)
        request.usage.add_tokens(input_tokens=10, output_tokens=5)
        request.usage.add_cost(0.25)
        return TaskResult(text=f"echo: {text}", structured_output={"length": len(text)})


@a2a_agent(identity=AgentIdentity(name="streamer", description="Streams its progress."))
class StreamAgent(AgentEnvAgent):
    async def run(self, request: TaskRequest[AgentConfig]) -> AsyncIterator[Any]:
        for i in range(3):
            yield f"step {i}"
            await asyncio.sleep(0.01)
        yield Progress(data={"progress": 1.0})
        yield Artifact([TextPart("the artifact")], name="result.txt")
        if request.text == "slow":
            await asyncio.sleep(30)
        yield TaskResult(text=f"streamed: {request.text}")


@attrs.define
class Served:
    server: RunningServer
    agent: Any

    @property
    def url(self) -> str:
        return self.server.url


class Rpc:
    """Raw JSON-RPC against ``/a2a``: the whole response envelope, nothing hidden."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url + "/a2a"
        self._id = 0

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        self._id += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self._id, "method": method}
        if params is not None:
            body["params"] = params
        async with self.session.post(self.url, json=body) as resp:
            assert resp.status == 200
            out: dict[str, Any] = await resp.json()
            assert out["jsonrpc"] == "2.0"
            return out

    async def send(self, text: str, *, context_id: str | None = None, blocking: bool = True,
                   task_id: str | None = None) -> dict[str, Any]:
        """``message/send``; returns the result Task (fails the test on an error)."""
        message: dict[str, Any] = {"messageId": f"m{self._id + 1}", "role": "user",
                                   "kind": "message", "parts": [{"kind": "text", "text": text}]}
        if context_id is not None:
            message["contextId"] = context_id
        if task_id is not None:
            message["taskId"] = task_id
        out = await self.call("message/send", {"message": message,
                                               "configuration": {"blocking": blocking}})
        assert "error" not in out, out
        result: dict[str, Any] = out["result"]
        return result

    async def wait(self, task_id: str, timeout: float = 20) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task settles."""
        deadline = time.monotonic() + timeout
        while True:
            task = (await self.call("tasks/get", {"id": task_id}))["result"]
            if task["status"]["state"] not in ("submitted", "working"):
                return dict(task)
            assert time.monotonic() < deadline, f"task {task_id} did not settle: {task}"
            await asyncio.sleep(0.05)


def reply_data(task: dict[str, Any]) -> dict[str, Any]:
    """The final reply's data part (usage, error_*, structured_output)."""
    data = [p["data"] for p in task["status"]["message"]["parts"] if p["kind"] == "data"]
    assert len(data) == 1, task
    return dict(data[0])


def reply_text(task: dict[str, Any]) -> str | None:
    texts = [p["text"] for p in task["status"]["message"]["parts"] if p["kind"] == "text"]
    return texts[-1] if texts else None

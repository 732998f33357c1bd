"""A trivial agent on the REFERENCE's agent SDK (PyPI ``agentenv-framework-protocol[agent]``
0.1.379, import ``agentenv_protocol.a2a_agent``): a test fixture that only runs inside its image.

Why: our ``a2a`` agent type must deploy and prompt agents written for the reference, not only
ours. The agent is deliberately simple, so a failing test points at the wire, not at it:

* every reply starts ``reference agent got: <prompt>``; it names the system prompt set over
  ``agent-config`` and the MCP servers added over ``mcp-config`` (with their tools);
* ``echo <text>`` calls the ``echo`` tool of every MCP server that has one (the reference's
  ``mcp`` client, with the headers AgentEnv registered) and adds what it returned;
* ``sleep <seconds>`` waits (for ``tasks/cancel``); ``cancelled?`` says how many tasks were
  cancelled while they ran; ``fail`` answers a failed task (``agent_error``);
* each task's trajectory (format ``reference-test/1``) and usage (fixed token counts) are
  reported through the SDK, so AgentEnv's records can be checked against them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentenv_protocol.a2a_agent import (
    MCP_CONFIG_V1,
    TRAJECTORY_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    TextPart,
    Usage,
    a2a_agent,
    create_app,
    enable,
)

INPUT_TOKENS = 11
OUTPUT_TOKENS = 7
CANCELLED: list[str] = []


class ReferenceTestConfig(AgentConfig):
    system_prompt: str | None = None


async def call_echo(server: dict[str, Any], text: str) -> tuple[list[str], str | None]:
    """The server's tool names, and what its ``echo`` tool returned for ``text`` (if it has one)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(server["url"], headers=server.get("headers") or None) as (
            read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        tools = sorted(tool.name for tool in (await session.list_tools()).tools)
        if "echo" not in tools:
            return tools, None
        result = await session.call_tool("echo", {"text": text})
        return tools, " ".join(getattr(c, "text", "") for c in result.content)


@a2a_agent(
    identity=AgentIdentity(name="reference-test-agent", version="0.0.1",
                           description="A trivial agent on the reference's SDK (a test fixture)."),
    config=ReferenceTestConfig,
    extensions=(MCP_CONFIG_V1, enable(TRAJECTORY_V1, live=True)),
)
class ReferenceTestAgent(AgentEnvAgent):
    async def run(self, request: TaskRequest[ReferenceTestConfig]) -> TaskResult:
        prompt = " ".join(p.text for p in request.parts if isinstance(p, TextPart))
        log = request.trajectory
        log.set_format("reference-test/1")
        log.append({"type": "prompt", "text": prompt})
        if prompt.startswith("sleep "):
            try:
                await asyncio.sleep(float(prompt.split()[1]))
            except asyncio.CancelledError:
                CANCELLED.append(request.task_id)
                raise
        if prompt == "fail":
            return TaskResult.failure("reference.asked_to_fail", "asked to fail")
        lines = [f"reference agent got: {prompt}"]
        if prompt == "cancelled?":
            lines.append(f"cancelled while running: {len(CANCELLED)}")
        if request.config.system_prompt:
            lines.append(f"system prompt: {request.config.system_prompt}")
        tool_calls = 0
        for name, server in sorted(request.mcp_servers.items()):
            if prompt.startswith("echo "):
                tools, echoed = await call_echo(server, prompt[len("echo "):])
                lines.append(f"mcp server {name}: tools {', '.join(tools)}")
                if echoed is not None:
                    tool_calls += 1
                    log.append({"type": "tool_call", "server": name, "tool": "echo",
                                "result": echoed})
                    lines.append(f"echo returned: {echoed}")
            else:
                lines.append(f"mcp server {name}: {server['url']}")
        answer = "\n".join(lines)
        log.append({"type": "answer", "text": answer})
        return TaskResult.text(answer, usage=Usage(
            tool_call_count=tool_calls, input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS))


app = create_app(ReferenceTestAgent())

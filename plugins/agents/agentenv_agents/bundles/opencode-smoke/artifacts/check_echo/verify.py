"""Calls the echo tool through the gateway, as an agent would, with AgentEnv's MCP client.

The run has that client loaded already, so the check costs one round trip. A script may just as
well use the official ``mcp`` client (the reference's bundles do); the run then loads it while
the env deploys, about 0.7 s of CPU, which on 2 cores made a warm ``agents-smoke`` run 0.5 s
slower (4.6 s against 4.1 s).
"""

from agentenv_protocol.client import McpClient

TEXT = "hello from agent-env"


async def verify(mcp_url):
    async with McpClient(mcp_url) as client:
        result = await client.call_tool("echo", {"text": TEXT})
    return [{
        "id": "echoes",
        "result": result.text == TEXT and not result.is_error,
        "description": f"echo returned {result.text!r}",
    }]

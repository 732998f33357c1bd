"""Calls the echo tool through the gateway with the official MCP client, as an agent would."""

from mcp import ClientSession

try:  # mcp 2.x
    from mcp.client.streamable_http import streamable_http_client as open_streams
except ImportError:  # mcp 1.x
    from mcp.client.streamable_http import streamablehttp_client as open_streams

TEXT = "hello from agent-env"


async def verify(mcp_url):
    async with open_streams(mcp_url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": TEXT})
    is_error = getattr(result, "is_error", getattr(result, "isError", False))
    echoed = "".join(getattr(part, "text", "") for part in result.content)
    return [{
        "id": "echoes",
        "result": echoed == TEXT and not is_error,
        "description": f"echo returned {echoed!r}",
    }]

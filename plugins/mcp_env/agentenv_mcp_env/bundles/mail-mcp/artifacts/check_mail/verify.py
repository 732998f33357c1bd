"""Searches the inbox for the invoice through the gateway with the official MCP client."""

import json

from mcp import ClientSession

try:  # mcp 2.x
    from mcp.client.streamable_http import streamable_http_client as open_streams
except ImportError:  # mcp 1.x
    from mcp.client.streamable_http import streamablehttp_client as open_streams


async def verify(mcp_url):
    async with open_streams(mcp_url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("search_emails", {"query": "INVOICE"})
    is_error = getattr(result, "is_error", getattr(result, "isError", False))
    text = "".join(getattr(part, "text", "") for part in result.content)
    ids = [m.get("id") for m in json.loads(text).get("messages", [])] if not is_error else []
    return [{
        "id": "finds-the-invoice",
        "result": ids == ["m-1"],
        "description": f"search_emails('INVOICE') returned {ids}",
    }]

"""A verify script in the reference's style (official mcp 1.x client API): bump once."""

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def verify(mcp_url):
    async with streamable_http_client(mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("bump", {})
    text = "".join(getattr(part, "text", "") for part in result.content)
    return [{"id": "bumps", "result": not result.isError and text.isdigit(),
             "description": f"bump returned {text!r}"}]

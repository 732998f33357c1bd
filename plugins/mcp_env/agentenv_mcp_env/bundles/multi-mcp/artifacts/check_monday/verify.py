"""The office env after the monday universe seeded both its servers: the notes server holds its
three notes, and the digest server's summaries carry its heading."""

from agentenv_protocol.client import McpClient


async def verify(mcp_url):
    async with McpClient(mcp_url) as client:
        digest = (await client.call_tool("digest")).text
    want = "Monday: 3 notes; the longest: book the meeting room for the quarterly review"
    return [{"id": "seeded", "result": digest == want, "description": f"digest said {digest!r}"}]

"""The env holds the warmed entry and then exactly one entry of this episode's player."""

import json

from agentenv_protocol import McpClient


async def verify(mcp_url):
    async with McpClient(mcp_url, client_name="check-entries") as client:
        found = json.loads((await client.call_tool("entries", {})).text)["entries"]
    return [{"id": "warm_then_own", "result": len(found) == 2 and found[0].startswith("warm")
             and found[1].startswith("member"), "description": f"entries: {found}"}]

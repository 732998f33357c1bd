"""Reads the orders table through the database service's own query tool: order 1002 must be
delivered now, and the other orders as they were."""

import json

from agentenv_protocol.client import McpClient

WANT = {1001: "delivered", 1002: "delivered", 1003: "shipped"}


async def verify(mcp_url):
    async with McpClient(mcp_url) as client:
        result = await client.call_tool("query", {"sql": "SELECT id, status FROM orders"})
    rows = (result.structured_content or json.loads(result.text or "{}")).get("rows", [])
    found = {row["id"]: row["status"] for row in rows}
    return [
        {"id": "fixed", "result": found.get(1002) == "delivered",
         "description": f"order 1002 is {found.get(1002)!r}"},
        {"id": "nothing_else", "result": found == WANT,
         "description": f"orders now {found}"},
    ]

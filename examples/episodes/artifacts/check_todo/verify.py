"""Checks the todo list's final state through the gateway, with the official MCP client."""

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
            result = await session.call_tool("list_items", {})
    text = "".join(getattr(part, "text", "") for part in result.content)
    items = json.loads(text)["items"]
    by_text = {item["text"]: item for item in items}
    milk, dog = by_text.get("buy milk"), by_text.get("walk the dog")
    return [
        {"id": "two_items", "result": len(items) == 2,
         "description": f"the list has {len(items)} items: {sorted(by_text)}"},
        {"id": "milk_done", "result": bool(milk and milk["done"]),
         "description": "'buy milk' is on the list and done"},
        {"id": "dog_open", "result": bool(dog and not dog["done"]),
         "description": "'walk the dog' is on the list and still open"},
        {"id": "added_as_planner", "result": all(i["added_by"] == "planner" for i in items),
         "description": "every item was added by the planner role: "
                        f"{sorted({i['added_by'] for i in items})}"},
    ]

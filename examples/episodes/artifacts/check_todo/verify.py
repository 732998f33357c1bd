"""Checks the todo list's final state through the gateway's MCP URL.

It uses agentenv_protocol's MCP client (the verifier runs inside agent-env, where it is always
installed): the official ``mcp`` client works too (see the echo-mcp bundle), but builds a TLS
context per connection, which costs more than the whole check when episodes run by the dozen.
"""

import json

from agentenv_protocol import McpClient


async def verify(mcp_url):
    async with McpClient(mcp_url, client_name="check-todo") as client:
        result = await client.call_tool("list_items", {})
    items = json.loads(result.text)["items"]
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

"""Through the books env's one MCP URL: an entry the ledger writes (to its own schema of the
env state store) is what the audit, another server, reads back."""

import json

from agentenv_protocol.client import McpClient


async def verify(mcp_url):
    async with McpClient(mcp_url) as client:
        schema = json.loads((await client.call_tool("where_am_i")).text)["schema"]
        before = json.loads((await client.call_tool("ledger_entries")).text)["entries"]
        await client.call_tool("add_entry", {"text": "paid the plumber"})
        after = json.loads((await client.call_tool("ledger_entries")).text)["entries"]
    return [
        {"id": "own_schema", "result": schema == "ledger",
         "description": f"the ledger writes to schema {schema!r}"},
        {"id": "shared_rows", "result": after == [*before, "paid the plumber"],
         "description": f"the audit read {after} (before the write: {before})"},
    ]

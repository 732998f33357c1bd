"""Through the office env's one MCP URL: notes go to one service, and the other, which reads
them over the env's private network, summarises them."""

from agentenv_protocol.client import McpClient, fetch_card


async def verify(mcp_url):
    async with McpClient(mcp_url) as client:
        tools = sorted(t.name for t in await client.list_tools())
        await client.call_tool("add_note", {"text": "buy milk"})
        await client.call_tool("add_note", {"text": "call the plumber"})
        digest = (await client.call_tool("digest")).text
    card = await fetch_card(mcp_url.removesuffix("/mcp"))
    children = sorted(c.name for c in card.children_environments or [])
    return [
        {"id": "one_namespace", "result": tools == ["add_note", "digest"],
         "description": f"tools {tools}"},
        {"id": "services_talk", "result": digest == "2 notes; the longest: call the plumber",
         "description": f"digest said {digest!r}"},
        {"id": "card_names_children", "result": card.name == "office"
         and children == ["digest", "notes"],
         "description": f"card {card.name!r} with children {children}"},
    ]

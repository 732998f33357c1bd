"""A verify script in the reference's style that also reads the run: the graded prompt's turns
(``run.turns``, each a user ``message`` and the agent's ``reply``) and the env's state."""

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def verify(mcp_url, run):
    async with streamable_http_client(mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("bump", {})
    count = "".join(getattr(part, "text", "") for part in result.content)
    replies = [turn.reply.text for turn in run.turns if turn.reply is not None]
    return [
        {"id": "turns", "result": len(run.turns) == 2, "description": f"{len(run.turns)} turns"},
        {"id": "said-the-count", "result": any(count in reply for reply in replies),
         "description": f"the env says {count}; the agent said {replies}"},
        {"id": "no-firings", "result": run.firings() == (), "description": "none recorded"},
    ]

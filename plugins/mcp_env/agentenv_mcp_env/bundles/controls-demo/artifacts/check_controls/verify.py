"""What the steps before it did to the desk, seen through the gateway as callers would: the
clock reads the time the task set (frozen), the report is locked for interns but not managers,
the trigger had the receptionist agent sign the first visitor in, and sign_in fails on
purpose."""

import datetime as dt

from agentenv_protocol.client import McpClient


async def verify(mcp_url):
    async with McpClient(mcp_url, headers={"AgentEnv-Role": "intern"}) as intern:
        told = (await intern.call_tool("what_time")).text
        locked = await intern.call_tool("file_report")
        flaky = await intern.call_tool("sign_in", {"name": "Late Larry"})
        book = (await intern.call_tool("visitors")).text
    async with McpClient(mcp_url, headers={"AgentEnv-Role": "manager"}) as manager:
        filed = (await manager.call_tool("file_report")).text
    when = dt.datetime.fromisoformat(told) if told != "wall clock" else None
    return [
        {"id": "clock", "result": when == dt.datetime(2030, 1, 2, 8, 0, tzinfo=dt.UTC),
         "description": f"what_time said {told!r}"},
        {"id": "locked_for_interns", "result": locked.is_error and filed == "filed",
         "description": f"intern got {locked.text!r}, manager got {filed!r}"},
        {"id": "trigger_prompted_the_receptionist",
         "result": "Ada Lovelace" in str(book),
         "description": f"the visitors' book holds {book!r}"},
        {"id": "flaky_on_purpose", "result": flaky.is_error and "unavailable" in flaky.text,
         "description": f"sign_in said {flaky.text!r}"},
    ]

"""Reads the todo app's state back through its data plane (data/get at the gateway's
/svc/todo/), and the gateway's trajectory for the browser's request that added the item."""

import json

import aiohttp

ITEM = "buy oat milk"


async def verify(mcp_url):
    base = mcp_url.removesuffix("/mcp")
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/svc/todo/agentenv",
                             json={"jsonrpc": "2.0", "id": 1, "method": "data/get"}) as resp:
            reply = await resp.json()
        async with http.get(f"{base}/trajectory") as resp:
            events = [json.loads(line) for line in (await resp.text()).splitlines() if line]
    todos = reply["result"]["parts"][0]["data"]["todos"]
    texts = [todo["text"] for todo in todos]
    posts = [e for e in events if e.get("type") == "http_request" and e.get("method") == "POST"
             and e.get("path") == "/api/todos" and ITEM in e.get("request_body", "")]
    return [
        {"id": "item_added", "result": texts == ["water the plants", ITEM],
         "description": f"the app's list is {texts}"},
        {"id": "through_the_browser", "result": len(posts) == 1 and posts[0]["status"] == 201,
         "description": f"{len(posts)} POST /api/todos with the item went through the gateway"},
    ]

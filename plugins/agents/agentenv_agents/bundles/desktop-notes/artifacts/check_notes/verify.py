"""Reads ~/notes.txt on the desktop through the driver's computer-exec/v1 extension (the
gateway's pass-through to the env server), as the framework reads a computer's state."""

import aiohttp

EXPECTED = "Buy oat milk\nCall the dentist\n"


async def verify(mcp_url):
    base = mcp_url.removesuffix("/mcp")
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/env/desktop/agentenv/ext/computer-exec/run",
                             json={"argv": ["cat", "notes.txt"],
                                   "request_id": "check-notes"}) as resp:
            ran = await resp.json()
    return [{"id": "saved", "result": ran.get("exit_code") == 0 and ran.get("stdout") == EXPECTED,
             "description": f"cat notes.txt: exit {ran.get('exit_code')}, "
                            f"{ran.get('stdout', ran)!r}"}]

"""``mcp-call``: the envs' MCP tools as a shell command, for an agent whose only tool is bash
(mini-swe-agent, pi): the SDK installs it with the protocol package, so every agent image has it.

``mcp-call list`` prints every tool (``server/tool``, its description and input schema);
``mcp-call TOOL '{"arg": ...}'`` calls it (``server/tool`` when two servers offer the name) and
prints the result's text; a tool error exits 1 with the error's text. The servers (URL and
headers, the env's token among them) are the ones the runtime registered through mcp-config/v1,
read from ``AGENTENV_MCP_SERVERS`` (a file only the agent's user can read, written by
:func:`write_servers`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The variable naming the servers file.
SERVERS_ENV = "AGENTENV_MCP_SERVERS"


def write_servers(servers: Mapping[str, Any], path: Path) -> dict[str, str]:
    """Write the MCP servers a request has (``request.mcp_servers``) to ``path``, readable by
    this user only (it holds the envs' tokens); the variables that point ``mcp-call`` at it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({name: {"url": s.url, "headers": dict(s.headers)}
                                for name, s in servers.items()}), encoding="utf-8")
    path.chmod(0o600)
    return {SERVERS_ENV: str(path)}


def servers() -> dict[str, Any]:
    path = os.environ.get(SERVERS_ENV, "")
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


async def call(argv: list[str]) -> int:
    import aiohttp

    from agentenv_protocol.client import McpClient

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    known = servers()
    if not known:
        print("mcp-call: no MCP servers were given to this agent", file=sys.stderr)
        return 2
    async with aiohttp.ClientSession() as http:
        clients = {}
        for name, server in known.items():
            client = McpClient(server["url"], headers=dict(server.get("headers") or {}),
                               session=http, client_name="mcp-call")
            await client.connect()
            clients[name] = client
        offered = {name: await client.list_tools_raw() for name, client in clients.items()}
        if argv[0] == "list":
            for name, tools in offered.items():
                for entry in tools:
                    print(f"{name}/{entry['name']}: {entry.get('description') or ''}".rstrip())
                    print(f"  input: {json.dumps(entry.get('inputSchema') or {})}")
            return 0
        wanted = argv[0]
        server, _, tool = wanted.rpartition("/")
        matches = [s for s, tools in offered.items()
                   if (not server or s == server) and any(t["name"] == tool for t in tools)]
        if len(matches) != 1:
            why = "no server offers" if not matches else "several servers offer"
            print(f"mcp-call: {why} '{wanted}' (mcp-call list shows them; name one as "
                  "server/tool)", file=sys.stderr)
            return 2
        try:
            arguments = json.loads(argv[1]) if len(argv) > 1 else {}
        except ValueError as exc:
            print(f"mcp-call: the arguments are not JSON: {exc}", file=sys.stderr)
            return 2
        if not isinstance(arguments, dict):
            print("mcp-call: the arguments must be a JSON object", file=sys.stderr)
            return 2
        result = await clients[matches[0]].call_tool(tool, arguments)
        print(result.text)
        return 1 if result.is_error else 0


def main() -> None:
    """The ``mcp-call`` command: an unreachable server is one line and exit 1."""
    try:
        code = asyncio.run(call(sys.argv[1:]))
    except Exception as exc:  # the model reads this line; a traceback would only cost tokens
        print(f"mcp-call: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()

"""Names on the wire that env servers, clients, the gateway and the kernel must agree on.

Plain constants and no imports, so any side (the gateway, an env image, ``agent_env``'s turns)
can use them without loading the env SDK or aiohttp, and none keeps its own copy to drift.
"""

from __future__ import annotations

#: MCP protocol versions an endpoint answers; the newest is what clients ask for.
SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = "2025-11-25"

#: MCP streamable HTTP headers.
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
#: Who is calling, for a listing (a call carries it in ``_meta``).
ROLE_HEADER = "AgentEnv-Role"

#: ``_meta`` keys: on a tool, hidden unless an access rule names it for the caller's role;
#: on a call, the caller's role and session.
HIDDEN_META_KEY = "agentenv.io/hiddenByDefault"
ROLE_META_KEY = "agentenv.io/role"
SESSION_META_KEY = "agentenv.io/session"

#: Where an env server serves its card, its JSON-RPC data plane and MCP (the reference's names).
WELL_KNOWN_PATH = "/.well-known/agent-env.json"
RPC_PATH = "/agentenv"
MCP_PATH = "/mcp"

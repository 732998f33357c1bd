"""agentenv protocol v1: the env server SDK, clients and gateway.

Names are imported lazily (module ``__getattr__``) so that ``import agentenv_protocol`` stays
cheap in every env image: aiohttp is loaded only when something serves or calls.
"""

from __future__ import annotations

import importlib
from typing import Any

from .tls import defer_aiohttp_certificates

__version__ = "0.1.0"

# Before anything imports aiohttp: its TLS contexts get their CA certificates on first use.
defer_aiohttp_certificates()

_EXPORTS = {
    "AgentEnvEnvironment": "env",
    "environment_card": "env",
    "tool": "env",
    "reset_data": "env",
    "add_data": "env",
    "get_data": "env",
    "extension": "env",
    "InjectsFaults": "faults",
    "ToolContext": "env",
    "Caller": "access",
    "bound": "env",
    "AgentEnvApplication": "mounting",
    "AgentEnvFastMCPApplication": "mounting",
    "AgentEnvStarletteApplication": "mounting",
    "create_fastmcp_app": "mounting",
    "injecting": "mounting",
    "RPC_PATH": "wire",
    "WELL_KNOWN_PATH": "wire",
    "MCP_PATH": "wire",
    "AgentEnvError": "errors",
    "ProtocolError": "errors",
    "TransportError": "errors",
    "TextPart": "parts",
    "FilePart": "parts",
    "DataPart": "parts",
    "FileContent": "parts",
    "Part": "parts",
    "EnvironmentCard": "card",
    "ToolInfo": "card",
    "ExtensionInfo": "card",
    "McpClient": "client",
    "DataPlaneClient": "client",
    "ToolResult": "client",
    "ToolSession": "client",
    "ToolSessionError": "client",
    "fetch_card": "client",
    "create_app": "server",
    "create_gateway_app": "gateway",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentenv_protocol' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

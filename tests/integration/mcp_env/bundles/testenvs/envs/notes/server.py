"""An env server built the reference's other ways: ``create_fastmcp_app`` and a FastMCP app of
the env's own (``self.mcp``, with a tool registered on it directly through ``injecting``).

Run it with ``python server.py create|own`` (binds MCP_HOST/MCP_PORT), as this folder's image
does (on mcp 1.x, ``FastMCP``); ``tests/integration/protocol/test_fastmcp_mount.py`` runs it on
the dev venv's mcp 2.x (``MCPServer``).
"""

import os
import sys
from typing import Annotated

from pydantic import Field

from agentenv_protocol import (
    AgentEnvEnvironment,
    EnvironmentCard,
    ToolContext,
    add_data,
    create_fastmcp_app,
    environment_card,
    extension,
    get_data,
    injecting,
    reset_data,
    tool,
)


@environment_card(name="notes")
class NotesEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.notes: list = []

    @tool(name="add_note")
    def add_note(self, text: Annotated[str, Field(description="The note.")],
                 context: ToolContext) -> str:
        """Keep a note, saying who kept it."""
        self.notes.append(text)
        return f"{context.role or 'default'} kept {text!r} ({len(self.notes)} notes)"

    @tool(name="whoami")
    async def whoami(self) -> str:
        """The caller's role, read from the current call."""
        return ToolContext.current().role or "default"

    @reset_data
    async def reset(self) -> None:
        self.notes.clear()

    @add_data
    async def add(self, parts) -> None:
        self.notes.extend(parts)

    @get_data
    async def get(self):
        return self.notes

    @extension("urn:agentenv:clock/v1")
    async def sync_time(self, env_get_time_url: str) -> dict:
        """Remember where the gateway serves virtual time."""
        self.time_url = env_get_time_url
        return {"ok": True, "url": env_get_time_url}


def count_notes(context: ToolContext) -> str:
    """A tool registered on the app directly, not through @tool."""
    return f"{context.tool} for {context.role or 'default'}"


class OwnAppEnv(NotesEnv):
    """The reference's other pattern: the env builds its own FastMCP app, serve() mounts."""

    def __init__(self) -> None:
        super().__init__()
        try:
            from mcp.server.fastmcp import FastMCP

            self.mcp = FastMCP("notes", host=os.environ.get("MCP_HOST", "0.0.0.0"),
                               port=int(os.environ.get("MCP_PORT", "18765")))
            self.mcp.settings.transport_security.enable_dns_rebinding_protection = False
        except ModuleNotFoundError:  # mcp 2.x: serve() passes MCP_HOST/MCP_PORT to run()
            from mcp.server.mcpserver import MCPServer

            self.mcp = MCPServer("notes")
        self.mcp.tool(name="count_notes")(injecting(count_notes))


if __name__ == "__main__":
    if sys.argv[1] == "create":
        create_fastmcp_app(NotesEnv(), card=EnvironmentCard(name="notes")).run(
            transport="streamable-http")
    else:
        OwnAppEnv().serve()

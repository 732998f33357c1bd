"""mcp_env's own settings: the ``[plugins.agentenv-framework-mcp-env]`` table.

Why a class in the runtime's ``state`` and not a module global: the kernel checks the table
against its fields (an unknown key is a one-line error naming the known ones), and two runtimes
in one process keep two settings.
"""

from __future__ import annotations

from typing import Any

import attrs

from agent_env.api import build_settings, current

TABLE = "[plugins.agentenv-framework-mcp-env]"
STATE_KEY = "mcp_env"


@attrs.frozen(kw_only=True)
class McpEnvSettings:
    """``progress``: whether deploy progress lines (image builds, cache hits) reach the run's
    progress display through ``ctx.note``; ``progress = false`` turns them off. ``db_mcp``:
    whether an env state's store gets read-only MCP tools beside it, at the gateway's
    ``/env/db-mcp/mcp`` (``db_mcp = false``: one container fewer per deploy)."""

    progress: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    db_mcp: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))


def configure(settings: dict[str, Any]) -> None:
    """Check the table and keep the result in the current runtime's state."""
    current().state[STATE_KEY] = build_settings(
        McpEnvSettings, settings, where=TABLE, what="the mcp_env plugin"
    )


def mcp_env_settings() -> McpEnvSettings:
    """The settings in effect (defaults when no table was handed over)."""
    found = current().state.get(STATE_KEY)
    return found if isinstance(found, McpEnvSettings) else McpEnvSettings()

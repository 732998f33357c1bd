"""mcp_env's hook implementations: the ``mcp_server`` env type, its steps and two bundles.

Cheap to import on purpose: the classes are imported inside the hooks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_env.api import BundleSource, hookimpl

BUNDLES = Path(__file__).parent / "bundles"


@hookimpl
def agent_env_env_types() -> list[type]:
    from agentenv_mcp_env.deployment import McpServerEnv

    return [McpServerEnv]


@hookimpl
def agent_env_step_types() -> list[type]:
    from agentenv_mcp_env.steps import (
        DeployEnv,
        EnvOutcomeVerifier,
        ResetEnv,
        VerifyEnvCard,
        VerifyEnvCoreProtocol,
    )

    return [DeployEnv, EnvOutcomeVerifier, ResetEnv, VerifyEnvCard, VerifyEnvCoreProtocol]


@hookimpl
def agent_env_bundles() -> list[BundleSource]:
    return [
        BundleSource("echo-mcp", BUNDLES / "echo-mcp"),
        BundleSource("mail-mcp", BUNDLES / "mail-mcp"),
    ]


@hookimpl
def agent_env_configure(settings: dict[str, Any]) -> None:
    """``progress = false`` silences the deploy's image lines (see :mod:`.settings`)."""
    from agentenv_mcp_env.settings import configure

    configure(settings)

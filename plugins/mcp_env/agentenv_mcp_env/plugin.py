"""mcp_env's hook implementations: the ``mcp_server``, ``multi``, ``service``,
``gateway_server``, ``service_db``, ``website`` and ``computer_driver`` env types, the verify
steps and the bundles.

Cheap to import on purpose: the env type and steps are ``Lazy``, imported when a run uses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_env.api import BundleSource, Lazy, hookimpl

BUNDLES = Path(__file__).parent / "bundles"


STEPS = {
    "env_outcome_verifier": "steps:EnvOutcomeVerifier",
    "reset_env": "steps:ResetEnv",
    "verify_env_card": "steps:VerifyEnvCard",
    "verify_env_core_protocol": "steps:VerifyEnvCoreProtocol",
    "sync_env_clock": "control_steps:SyncEnvClock",
    "modify_env_tool_access": "control_steps:ModifyEnvToolAccess",
    "apply_server_config": "control_steps:ApplyServerConfig",
    "snapshot_env": "control_steps:SnapshotEnv",
    "verify_mcp_tool_schema": "steps:VerifyMcpToolSchema",
    "build_mcp_cli": "mcp_cli:BuildMcpCli",
    "register_env_triggers": "trigger_steps:RegisterEnvTriggers",
    "verify_universe_load_export_roundtrip": "universe_steps:VerifyUniverseLoadExportRoundtrip",
    "combine_universe_verdicts": "universe_steps:CombineUniverseVerdicts",
    "verify_spec_conformance": "conformance_steps:VerifySpecConformance",
    "verify_mcp_env_assessment": "conformance_steps:VerifyMcpEnvAssessment",
}


@hookimpl
def agent_env_env_types() -> list[Lazy]:
    return [Lazy("mcp_server", "agentenv_mcp_env.deployment:McpServerEnv"),
            Lazy("multi", "agentenv_mcp_env.multi:MultiEnv"),
            Lazy("service", "agentenv_mcp_env.service:ServiceEnv"),
            Lazy("gateway_server", "agentenv_mcp_env.gateway_server:GatewayServerEnv"),
            Lazy("service_db", "agentenv_mcp_env.service_db:ServiceDbEnv"),
            Lazy("website", "agentenv_mcp_env.website:WebsiteEnv"),
            Lazy("computer_driver", "agentenv_mcp_env.computer:ComputerDriverEnv")]


@hookimpl
def agent_env_step_types() -> list[Lazy]:
    return [Lazy(name, f"agentenv_mcp_env.{target}") for name, target in STEPS.items()]


@hookimpl
def agent_env_bundles() -> list[BundleSource]:
    return [
        BundleSource("echo-mcp", BUNDLES / "echo-mcp"),
        BundleSource("mail-mcp", BUNDLES / "mail-mcp"),
        BundleSource("multi-mcp", BUNDLES / "multi-mcp"),
        BundleSource("shared-db", BUNDLES / "shared-db"),
        BundleSource("controls-demo", BUNDLES / "controls-demo"),
    ]


@hookimpl
def agent_env_configure(settings: dict[str, Any]) -> None:
    """``progress = false`` silences the deploy's image lines (see :mod:`.settings`)."""
    from agentenv_mcp_env.settings import configure

    configure(settings)

"""The first-party plugins: what each contributes, its distribution and extra.

The kernel never imports a plugin; it only knows these names so that an error can say what to
install (``the 's3' object store comes from the aws_stores plugin, which is not installed ...``)
and so that ``agent-env plugin add tensorlake`` can find the plugin's folder in a checkout.
``provides`` uses the host's own contribution kinds and names (stores as ``KIND:BACKEND``), and
``tests/unit/plugins/test_catalog.py`` checks it against what each installed plugin contributes.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class FirstPartyPlugin:
    short_name: str
    distribution: str
    extra: str | None
    provides: dict[str, tuple[str, ...]]

    def install_hint(self) -> str:
        if self.extra:
            return f"pip install 'agentenv-framework[{self.extra}]'"
        return f"pip install {self.distribution}"


FIRST_PARTY: tuple[FirstPartyPlugin, ...] = (
    FirstPartyPlugin(
        "docker_env",
        "agentenv-framework-docker-env",
        None,
        {"sandbox_provider": ("docker",), "store": ("image:local", "image:local_registry"),
         "bundle": ("task-container",)},
    ),
    FirstPartyPlugin(
        "mcp_env",
        "agentenv-framework-mcp-env",
        None,
        {
            "env_type": ("computer_driver", "gateway_server", "mcp_server", "multi", "service",
                         "service_db", "website"),
            "step_type": (
                "env_outcome_verifier",
                "reset_env",
                "verify_env_card",
                "verify_env_core_protocol",
                "sync_env_clock",
                "modify_env_tool_access",
                "apply_server_config",
                "snapshot_env",
                "verify_mcp_tool_schema",
                "build_mcp_cli",
                "register_env_triggers",
                "verify_universe_load_export_roundtrip",
                "combine_universe_verdicts",
                "verify_spec_conformance",
                "verify_mcp_env_assessment",
            ),
            "bundle": ("echo-mcp", "mail-mcp", "multi-mcp", "shared-db", "controls-demo"),
        },
    ),
    FirstPartyPlugin(
        "agents",
        "agentenv-framework-agents",
        "agents",
        {
            "agent_type": ("a2a", "nop", "oracle"),
            "agent": ("model-agent", "aider", "claude-code", "codex", "gemini", "mini-swe-agent",
                      "opencode", "openhands", "pi", "oracle", "nop"),
            "model_provider": ("scripted",),
            "step_type": ("deploy_agent", "prompt_agent", "snapshot_agent_state",
                          "agent_prompt_response_verifier", "verify_agent_card",
                          "scripted_model", "add_skills", "register_agent_triggers",
                          "deploy_human_agent", "peer_agents", "install_agent",
                          "verify_a2a_agent_card",
                          "verify_a2a_core_protocol", "verify_a2a_trajectory",
                          "verify_a2a_agent_config_identity", "verify_a2a_skill_config",
                          "verify_a2a_system_prompt", "verify_a2a_modalities",
                          "verify_a2a_role", "verify_a2a_agent_mcp", "verify_a2a_snapshot",
                          "verify_a2a_install", "verify_a2a_peer_agents"),
            "bundle": ("agents-smoke", "aider-smoke", "claude-code-smoke", "codex-smoke",
                       "conversation-smoke", "gemini-smoke", "install-demo", "mini-swe-agent-smoke",
                       "opencode-smoke", "openhands-smoke", "pi-smoke", "db-orders",
                       "website-todo", "desktop-notes"),
        },
    ),
    # contributes only the `up` command (a CLI claim, made when the CLI starts, not a
    # contribution kind the host lists at load time)
    FirstPartyPlugin("explorer", "agentenv-framework-explorer", "explorer", {}),
    # contributes only the `openenv` command group (`agent-env openenv serve`) and build_app
    FirstPartyPlugin("openenv", "agentenv-framework-openenv", "openenv", {}),
    FirstPartyPlugin(
        "smol_vm", "agentenv-framework-smol-vm", "smol", {"sandbox_provider": ("smol_vm",)}
    ),
    FirstPartyPlugin(
        "tensorlake",
        "agentenv-framework-tensorlake",
        "tensorlake",
        {"sandbox_provider": ("tensorlake",)},
    ),
    FirstPartyPlugin(
        "tenki", "agentenv-framework-tenki", "tenki", {"sandbox_provider": ("tenki",)}
    ),
    FirstPartyPlugin(
        "daytona", "agentenv-framework-daytona", "daytona", {"sandbox_provider": ("daytona",)}
    ),
    FirstPartyPlugin("e2b", "agentenv-framework-e2b", "e2b", {"sandbox_provider": ("e2b",)}),
    FirstPartyPlugin("boxd", "agentenv-framework-boxd", "boxd", {"sandbox_provider": ("boxd",)}),
    FirstPartyPlugin(
        "vercel", "agentenv-framework-vercel", "vercel", {"sandbox_provider": ("vercel",)}
    ),
    FirstPartyPlugin("modal", "agentenv-framework-modal", "modal",
                     {"sandbox_provider": ("modal", "modal_vm")}),
    FirstPartyPlugin("sail_vm", "agentenv-framework-sail-vm", "sail",
                     {"sandbox_provider": ("sail_vm",)}),
    FirstPartyPlugin("harbor", "agentenv-framework-harbor", "harbor",
                     {"bundle_format": ("harbor",)}),
    FirstPartyPlugin("ray_runner", "agentenv-framework-ray-runner", "ray",
                     {"runner": ("ray",), "sandbox_provider": ("ray",)}),
    FirstPartyPlugin(
        "aws_stores",
        "agentenv-framework-aws-stores",
        "aws",
        {"store": ("object:s3", "document:dynamodb", "secret:secretsmanager", "image:ecr")},
    ),
    FirstPartyPlugin(
        "gcp_stores",
        "agentenv-framework-gcp-stores",
        "gcp",
        {
            "store": (
                "object:gcs",
                "document:firestore",
                "secret:secretmanager",
                "image:artifact_registry",
            )
        },
    ),
)


def by_short_name(name: str) -> FirstPartyPlugin | None:
    for plugin in FIRST_PARTY:
        if name in (plugin.short_name, plugin.distribution):
            return plugin
    return None


def provider_of(kind: str, name: str) -> FirstPartyPlugin | None:
    """The first-party plugin that contributes ``name`` of contribution ``kind``."""
    for plugin in FIRST_PARTY:
        if name in plugin.provides.get(kind, ()):
            return plugin
    return None

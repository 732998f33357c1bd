"""The agents plugin's hooks: the agent steps (``deploy_agent``, ``prompt_agent``,
``install_agent``, the A2A validators and the rest of :data:`STEP_TYPES`), the ``a2a-agent``
command, the ``a2a``, ``oracle`` and ``nop`` agent types, the shipped ``model-agent``,
``claude-code``, ``codex``, ``gemini``, ``opencode``, ``openhands``, ``pi``, ``mini-swe-agent``,
``aider``, ``oracle`` and ``nop`` agents, and the ``agents-smoke``, ``aider-smoke``,
``claude-code-smoke``, ``codex-smoke``, ``gemini-smoke``, ``opencode-smoke``, ``openhands-smoke``,
``pi-smoke``, ``mini-swe-agent-smoke``, ``conversation-smoke`` and ``install-demo`` bundles
(and the env-type demos db-orders, website-todo, desktop-notes).

Cheap to import on purpose (the CLI imports every plugin at start): the agent type is a
:class:`Lazy` contribution, loaded only when a run deploys an agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent_env.api import (
    AgentSource,
    BundleSource,
    Lazy,
    LazyCommand,
    ModelProvider,
    hookimpl,
)

if TYPE_CHECKING:
    import click

HERE = Path(__file__).parent
AGENTS = HERE / "agents"
BUNDLES = HERE / "bundles"


@hookimpl
def agent_env_agent_types() -> list[Lazy]:
    return [Lazy("a2a", "agentenv_agents.a2a_type:A2aAgentType"),
            Lazy("oracle", "agentenv_agents.validators:OracleAgentType"),
            Lazy("nop", "agentenv_agents.validators:NopAgentType")]


@hookimpl
def agent_env_agents() -> list[AgentSource]:
    return [AgentSource("model-agent", AGENTS / "model-agent"),
            AgentSource("aider", AGENTS / "aider"),
            AgentSource("claude-code", AGENTS / "claude-code"),
            AgentSource("codex", AGENTS / "codex"),
            AgentSource("gemini", AGENTS / "gemini"),
            AgentSource("opencode", AGENTS / "opencode"),
            AgentSource("openhands", AGENTS / "openhands"),
            AgentSource("mini-swe-agent", AGENTS / "mini-swe-agent"),
            AgentSource("pi", AGENTS / "pi"),
            AgentSource("oracle", AGENTS / "oracle"),
            AgentSource("nop", AGENTS / "nop")]


@hookimpl
def agent_env_bundles() -> list[BundleSource]:
    return [BundleSource("agents-smoke", BUNDLES / "agents-smoke"),
            BundleSource("aider-smoke", BUNDLES / "aider-smoke"),
            BundleSource("claude-code-smoke", BUNDLES / "claude-code-smoke"),
            BundleSource("codex-smoke", BUNDLES / "codex-smoke"),
            BundleSource("conversation-smoke", BUNDLES / "conversation-smoke"),
            BundleSource("gemini-smoke", BUNDLES / "gemini-smoke"),
            BundleSource("install-demo", BUNDLES / "install-demo"),
            BundleSource("mini-swe-agent-smoke", BUNDLES / "mini-swe-agent-smoke"),
            BundleSource("opencode-smoke", BUNDLES / "opencode-smoke"),
            BundleSource("openhands-smoke", BUNDLES / "openhands-smoke"),
            BundleSource("pi-smoke", BUNDLES / "pi-smoke"),
            BundleSource("db-orders", BUNDLES / "db-orders"),
            BundleSource("website-todo", BUNDLES / "website-todo"),
            BundleSource("desktop-notes", BUNDLES / "desktop-notes")]


#: step type -> "module:class", imported when a task uses it
STEP_TYPES = {
    "deploy_agent": "agentenv_agents.steps:DeployAgent",
    "prompt_agent": "agentenv_agents.steps:PromptAgent",
    "snapshot_agent_state": "agentenv_agents.steps:SnapshotAgentState",
    "agent_prompt_response_verifier": "agentenv_agents.steps:AgentPromptResponseVerifier",
    "verify_agent_card": "agentenv_agents.steps:VerifyAgentCard",
    "scripted_model": "agentenv_agents.model_steps:ScriptedModel",
    "add_skills": "agentenv_agents.skill_steps:AddSkills",
    "register_agent_triggers": "agentenv_agents.trigger_steps:RegisterAgentTriggers",
    "deploy_human_agent": "agentenv_agents.human:DeployHumanAgent",
    "peer_agents": "agentenv_agents.peer_steps:PeerAgents",
    "install_agent": "agentenv_agents.install_steps:InstallAgent",
    "verify_a2a_agent_card": "agentenv_agents.a2a_validators:VerifyA2aAgentCard",
    "verify_a2a_core_protocol": "agentenv_agents.a2a_validators:VerifyA2aCoreProtocol",
    "verify_a2a_trajectory": "agentenv_agents.a2a_validators:VerifyA2aTrajectory",
    "verify_a2a_agent_config_identity":
        "agentenv_agents.a2a_validators:VerifyA2aAgentConfigIdentity",
    "verify_a2a_skill_config": "agentenv_agents.a2a_validators:VerifyA2aSkillConfig",
    "verify_a2a_system_prompt": "agentenv_agents.a2a_validators:VerifyA2aSystemPrompt",
    "verify_a2a_modalities": "agentenv_agents.a2a_validators:VerifyA2aModalities",
    "verify_a2a_role": "agentenv_agents.a2a_validators:VerifyA2aRole",
    "verify_a2a_agent_mcp": "agentenv_agents.a2a_validators:VerifyA2aAgentMcp",
    "verify_a2a_snapshot": "agentenv_agents.a2a_validators:VerifyA2aSnapshot",
    "verify_a2a_install": "agentenv_agents.a2a_validators:VerifyA2aInstall",
    "verify_a2a_peer_agents": "agentenv_agents.a2a_validators:VerifyA2aPeerAgents",
}


@hookimpl
def agent_env_step_types() -> list[Lazy]:
    return [Lazy(name, target) for name, target in STEP_TYPES.items()]


@hookimpl
def agent_env_cli(cli: click.Group) -> None:
    cli.add_command(LazyCommand("a2a-agent", "agentenv_agents.cli:a2a_agent"), "a2a-agent")


@hookimpl
def agent_env_model_providers() -> list[ModelProvider]:
    return [ModelProvider("scripted", "a TEST DOUBLE: answers from a script in the bundle "
                                      "(scripted:<artifact>), no model runs")]

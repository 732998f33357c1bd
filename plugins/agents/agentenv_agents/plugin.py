"""The agents plugin's hooks: the ``a2a`` agent type, the shipped ``model-agent``,
``claude-code`` and ``codex`` agents, the ``scripted_model`` step and the ``agents-smoke``,
``claude-code-smoke`` and ``codex-smoke`` bundles.

Cheap to import on purpose (the CLI imports every plugin at start): the agent type is a
:class:`Lazy` contribution, loaded only when a run deploys an agent.
"""

from __future__ import annotations

from pathlib import Path

from agent_env.api import AgentSource, BundleSource, Lazy, ModelProvider, hookimpl

HERE = Path(__file__).parent
AGENTS = HERE / "agents"
BUNDLES = HERE / "bundles"


@hookimpl
def agent_env_agent_types() -> list[Lazy]:
    return [Lazy("a2a", "agentenv_agents.a2a_type:A2aAgentType")]


@hookimpl
def agent_env_agents() -> list[AgentSource]:
    return [AgentSource("model-agent", AGENTS / "model-agent"),
            AgentSource("claude-code", AGENTS / "claude-code"),
            AgentSource("codex", AGENTS / "codex")]


@hookimpl
def agent_env_bundles() -> list[BundleSource]:
    return [BundleSource("agents-smoke", BUNDLES / "agents-smoke"),
            BundleSource("claude-code-smoke", BUNDLES / "claude-code-smoke"),
            BundleSource("codex-smoke", BUNDLES / "codex-smoke")]


@hookimpl
def agent_env_step_types() -> list[Lazy]:
    return [Lazy("scripted_model", "agentenv_agents.model_steps:ScriptedModel")]


@hookimpl
def agent_env_model_providers() -> list[ModelProvider]:
    return [ModelProvider("scripted", "a TEST DOUBLE: answers from a script in the bundle "
                                      "(scripted:<artifact>), no model runs")]

"""``TaskStepContext`` and what it lists, as the reference framework's step-type SDK shapes them
(see the package doc). :func:`agent_env.task_step.adapter.context_of` fills one from a run."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class DeployedEnv:
    env_id: str
    mcp_url: str | None = None
    instance_id: str | None = None
    env_version: int | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class DeployedAgent:
    agent_name: str
    api_url: str
    a2a_url: str | None = None
    sandbox_id: str | None = None
    sandbox_type: str | None = None
    instance_id: str | None = None
    role: str | None = None


@dataclasses.dataclass
class DeployedSandbox:
    sandbox_name: str
    sandbox_id: str
    sandbox_mode: str = "vm"
    sandbox_type: str | None = None


@dataclasses.dataclass
class PromptResponse:
    prompt_id: str
    response: str
    prompt_text: str | None = None
    tool_call_count: int | None = None
    model: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    agent_name: str | None = None
    step_id: str | None = None


@dataclasses.dataclass
class TaskStepContext:
    deployed_envs: list[DeployedEnv] = dataclasses.field(default_factory=list)
    deployed_agents: list[DeployedAgent] = dataclasses.field(default_factory=list)
    deployed_sandboxes: list[DeployedSandbox] = dataclasses.field(default_factory=list)
    prompt_responses: list[PromptResponse] = dataclasses.field(default_factory=list)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    agent_model: str | None = None
    instance_id: str | None = None

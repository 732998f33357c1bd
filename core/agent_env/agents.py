"""The agent contract: what an agent type returns, what a prompt gets back, and the roles steps
play towards an agent.

The kernel runs no agent itself. A plugin contributes agent types (``agent_env_agent_types``:
:class:`AgentType`), agent folders (``agent_env_agents``) and the steps that deploy and prompt
them (the agents plugin ships ``deploy_agent``, ``prompt_agent`` and their verifiers). What lives
here is what more than one party must agree on:

* an :class:`Agent` answers a prompt with an :class:`AgentReply`; the :class:`AgentSetup` says
  which envs and sandbox it gets, and an :class:`AgentDefinition` is its folder, read;
* a step says what it does to an agent with ``agent_role`` (:data:`DEPLOYS`, :data:`PROMPTS`,
  :data:`READS_REPLY`), so the episode API can stand a trainer in for an agent (see
  :meth:`agent_env.tasks.context.TaskContext.outside_agent`) without knowing the steps;
* a prompt step's output is ``{prompt_id, response, error_type, ...}``, which
  :func:`find_reply` reads for any verifier.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from agent_env._tuples import dict_tuple

if TYPE_CHECKING:
    from agent_env.env_types import EnvDeployment
    from agent_env.sandbox.base import Sandbox
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.steps import Step

#: The agent a step means when it names none (as task files written for agents expect).
DEFAULT_AGENT_NAME = "agent"
#: ``AgentReply.error_type``: the agent failed the prompt itself (recorded, scored 0) or could
#: not answer for reasons outside it (the run ends as ``error``, not scored).
AGENT_ERROR, INFRA_ERROR = "agent_error", "infra_error"

#: ``Step.agent_role``: the step brings agent ``agent_name`` up, asks it a prompt, or only
#: reads a recorded reply. Steps with no role that name an agent work inside it.
DEPLOYS, PROMPTS, READS_REPLY = "deploys", "prompts", "reads_reply"
#: The ``role`` of an agent a verifier deploys to judge (``rubrics_verifier`` with
#: ``use_agent_judge``): the run's ``--agent`` picks the agent under test, never its judge.
JUDGE_ROLE = "judge"


@attrs.frozen
class Usage:
    """What one prompt cost: the agent's tool calls, and the model calls and tokens (counted by
    a model gateway when the agent uses one, else as the agent reported them)."""

    tool_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    def plus(self, other: Usage) -> Usage:
        """Both together (a conversation's turns); a cost is known only when both are."""
        cost = (None if self.cost_usd is None or other.cost_usd is None
                else self.cost_usd + other.cost_usd)
        return Usage(self.tool_calls + other.tool_calls, self.model_calls + other.model_calls,
                     self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens, cost)


@attrs.frozen
class AgentReply:
    """What an agent answered to one prompt, and the tool calls it made on the way.

    ``error_type`` is set when the agent says it failed the prompt (:data:`AGENT_ERROR` or
    :data:`INFRA_ERROR`).
    """

    response: str
    trajectory: tuple[dict[str, Any], ...] = attrs.field(converter=dict_tuple, factory=tuple)
    usage: Usage = Usage()
    error_type: str | None = None
    error_message: str | None = None
    model: str | None = None
    #: The A2A conversation it answered in (A2A agents), recorded as ``a2a_context_id``.
    context_id: str | None = None
    #: Every model call the agent made for this prompt, in full (request, response, tokens).
    model_calls: tuple[dict[str, Any], ...] = attrs.field(converter=dict_tuple, factory=tuple)


class AgentPrompt(Protocol):
    """What a prompt step tells whoever answers it."""

    id: str
    agent_name: str
    system_prompt: str | None
    timeout_seconds: float
    model: str | None

    @property
    def text(self) -> str: ...


class Agent(Protocol):
    """An agent as the steps see it, whoever plays it.

    An agent with a container of its own may also have ``async put_file(path, data, *,
    mode=0o644)``: ``load_artifact`` with ``agent_name`` writes its files through it (a
    ``cli`` artifact is installed so). Without it such a load is refused by name.
    """

    name: str

    async def prompt(self, step: Any, timeout: float) -> AgentReply:
        """Answer ``step`` (an :class:`AgentPrompt`) within ``timeout`` seconds (StepError
        otherwise)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the run record keeps of this agent."""
        ...


@attrs.frozen
class AgentSetup:
    """Everything a deploying step resolved for an agent before anyone plays it."""

    name: str
    role: str | None
    system_prompt: str | None
    #: env id -> the deployment an earlier ``deploy_env`` made (see :mod:`agent_env.env_types`)
    envs: dict[str, EnvDeployment]
    #: The sandbox the agent works in (its ``bash`` tool), when the step names one.
    sandbox: Sandbox | None = attrs.field(default=None, eq=False)
    sandbox_name: str | None = None
    description: str | None = None


AGENT_FILE = "agent.toml"
DEFAULT_AGENT_TYPE = "a2a"


@attrs.frozen
class AgentDefinition:
    """One agent folder, read: who deploys it (``type``) and the settings every type shares."""

    name: str
    folder: Path
    type: str = DEFAULT_AGENT_TYPE
    image: str | None = None
    dockerfile: str = "Dockerfile"
    description: str = ""
    default_env_vars: dict[str, str] = attrs.field(factory=dict)
    metadata: dict[str, Any] = attrs.field(factory=dict)
    #: The type's own settings (``[config]``), checked by the type.
    config: dict[str, Any] = attrs.field(factory=dict)

    @property
    def takes_credentials(self) -> bool:
        return bool(self.metadata.get("takes_credentials", True))


class AgentType(Protocol):
    """What ``agent_env_agent_types`` contributes: how agents of one ``type`` come up."""

    name: str

    async def deploy(self, ctx: TaskContext, step: Step, setup: AgentSetup,
                     source: AgentDefinition) -> Agent:
        """Bring the agent up through the sandbox contract (torn down with the run)."""
        ...


def default_agent_id() -> str | None:
    """The agent deployed when a step names none: ``[agents] default`` (the reference spells
    it ``default_a2a_agent_id``)."""
    from agent_env.runtime import current

    section = current().config.section("agents")
    value = section.get("default") or section.get("default_a2a_agent_id")
    return str(value) if value else None


def agent_role(step: Any) -> str | None:
    """What ``step`` does to an agent (:data:`DEPLOYS`...), None for most steps."""
    role: str | None = getattr(type(step), "agent_role", None)
    return role


def find_reply(ctx: TaskContext, prompt_id: str) -> dict[str, Any] | None:
    """The recorded reply to ``prompt_id`` (a prompt step's output), if any."""
    for output in ctx.outputs.values():
        if isinstance(output, dict) and output.get("prompt_id") == prompt_id \
                and "response" in output:
            return output
    return None

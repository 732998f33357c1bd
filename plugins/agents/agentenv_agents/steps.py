"""Agent steps: ``deploy_agent``, ``prompt_agent`` and ``agent_prompt_response_verifier``.

An agent lives in ``ctx.agents[agent_name]`` as an object with ``async prompt(step, timeout)``
returning an :class:`AgentReply`. Who answers is not these steps' business: the episode machinery
(:mod:`agent_env.episodes`) stands in a player from outside AgentEnv (a training loop:
``TaskContext.outside_agent``), so a prompt becomes a turn of that player. Without one,
``deploy_agent`` deploys the agent folder ``a2a_agent_id`` names (``[agents] default`` when it names
none), through the agent type its ``agent.toml`` names (``agent_env_agent_types``); with neither, it
fails saying so (never a made-up success).

``prompt_agent`` records ``{prompt_id, agent_name, prompt, response, model, a2a_context_id,
tool_call_count, usage, error_type, error_message, agent_trajectory_object_key,
model_call_log_object_key, duration_seconds}`` as its output. The trajectory itself goes to the
object store (``runs/<instance>/prompt_agent_trajectories/prompt_id=<id>/trajectory-<agent>.json``,
the reference's layout under a per-run prefix), and beside it ``model-calls-<agent>.json``, every
model call the agent made for the prompt in full, so records stay small however long it worked.
An agent that reports ``agent_error`` has its reply recorded and scored 0 by the verifier (row
``prompt_error``), as the reference does; an ``infra_error`` ends the run as ``error`` (not
scored).

``agent_prompt_response_verifier`` scores the reply of one prompt (by ``prompt_id``, which is the
prompt step's id unless the step sets its own) with ``response_contains`` (every string of
``needles`` is in the reply) and ``response_regex_present`` (``pattern`` is found, ``re.search``
with ``flags`` names, DOTALL by default). Sandbox probe criteria in the same list are kept as
skipped rows, so one criteria list can be shared with ``verify_sandbox``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import (
    AGENT_ERROR,
    AGGREGATORS,
    DEFAULT_AGENT_NAME,
    DEPLOYS,
    INFRA_ERROR,
    JUDGE_ROLE,
    PROMPTS,
    READS_REPLY,
    Agent,
    AgentSetup,
    ChoiceProblem,
    InfraError,
    PreflightView,
    RunChoices,
    ScoreRow,
    Step,
    StepError,
    default_agent_id,
    find_reply,
)

from .a2a_user import A2aUser

if TYPE_CHECKING:
    from agent_env.api import TaskContext

__all__ = ["AGENT_ERROR", "DEFAULT_AGENT_NAME", "AgentPromptResponseVerifier", "DeployAgent",
           "PromptAgent", "SnapshotAgentState", "VerifyAgentCard", "find_reply"]

DEFAULT_PROMPT_TIMEOUT = 600.0
RESPONSE_CHECKS = ("response_contains", "response_regex_present")
#: Criteria other verifiers check; a shared criteria list keeps them as skipped rows here.
SANDBOX_CHECKS = ("probe_file_exists", "probe_dir_exists", "probe_file_contains",
                  "bash_cmd_succeeds")
TRAJECTORY_PREFIX = "prompt_agent_trajectories"


#: What ``deploy_agent``'s ``network_policy`` takes.
AGENT_NETWORK_POLICIES = ("sealed", "open", "allowlist")


@attrs.define(kw_only=True)
class DeployAgent(Step):
    """Bring up an agent that uses the tools of ``env_ids`` as ``role``."""

    type = "deploy_agent"
    agent_role = DEPLOYS
    entity_fields = {"env_ids": "envs", "agent_snapshot_files_artifact_id": "artifacts",
                     "a2a_agent_id": "agents", "skills[].artifact_id": "artifacts",
                     "solution_artifact_id": "artifacts"}
    version_fields = {"agent_snapshot_files_artifact_version": "agent_snapshot_files_artifact_id",
                      "a2a_agent_version": "a2a_agent_id",
                      "solution_artifact_version": "solution_artifact_id"}
    #: an agent a plugin installs is named by its name, not a bundle's (``needs`` finds it)
    installed_entity_fields = frozenset({"a2a_agent_id"})

    agent_name: str = DEFAULT_AGENT_NAME
    env_ids: list[str] = attrs.field(factory=list)
    system_prompt: str | None = None
    role: str | None = None
    agent_description: str | None = None
    #: A sandbox an earlier step deployed, that the agent works in (its ``bash`` tool).
    sandbox_name: str | None = None
    #: The reference's agent image to deploy; kept so its task files parse.
    a2a_agent_id: str | None = None
    a2a_agent_version: int | None = None
    sandbox_type: str | None = None
    ttl_seconds: int | None = None
    #: Added to the agent's environment (after its folder's ``default_env_vars``).
    env_vars: dict[str, str] = attrs.field(factory=dict)
    #: The agent's own sandbox, when it has one (no ``env_ids``).
    cpu: float | None = None
    memory_mb: int | None = None
    #: Free-form, kept in the record.
    metadata: dict[str, Any] = attrs.field(factory=dict)
    #: ``sealed`` (default): the agent's container reaches its env's gateway and the model
    #: gateway, nothing else (no internet, no host, no other run). ``allowlist``: sealed, plus
    #: the hosts and CIDRs ``allow_hosts``/``allow_cidrs`` list, through an egress proxy its
    #: ``HTTPS_PROXY`` names (:mod:`agentenv_agents.egress_proxy`). ``open``: it also has a
    #: route out (the run record says so).
    network_policy: str = "sealed"
    #: Skills given through skill-config/v1: ``{name, description, skill_md}`` inline, or
    #: ``{artifact_id, name?, description?}`` for a stored skill artifact (several files go as
    #: object grants, which needs an ``open`` agent and a store that signs URLs).
    skills: list[dict[str, Any]] = attrs.field(factory=list)
    #: Start from a saved snapshot (snapshot/v1): the id of a ``snapshot_agent_state`` step
    #: earlier in this task, or a stored files artifact holding ``trajectory.json`` (and maybe
    #: ``workspace.tar``); the agent's prompts then continue in the loaded context
    #: (``agent_snapshot_target_context_id``, else one the agent names). Needs an ``open`` agent
    #: and a store that signs URLs.
    agent_snapshot_step: str | None = None
    agent_snapshot_files_artifact_id: str | None = None
    agent_snapshot_files_artifact_version: int | None = None
    agent_snapshot_target_context_id: str | None = None
    #: Ours: the task's reference solution, which the ``oracle`` agent runs in place of an
    #: agent (other agents never see it: see :mod:`agentenv_agents.validators`).
    solution_artifact_id: str | None = None
    solution_artifact_version: int | None = None
    #: Keep a changelog (snapshot/v1): the agent writes an increment ``000001.tar``... after
    #: each tool call it marks and each turn, under
    #: ``runs/<instance>/agent_changelog/<step id>/<agent>/`` (the output's
    #: ``changelog_prefix``). Needs an ``open`` agent and a store that signs upload policies.
    enable_agent_changelog: bool = False
    #: Replay a changelog before the first prompt (after any snapshot): an earlier
    #: ``deploy_agent`` step's id (the changelog it kept) or an object-store prefix ending
    #: ``/``; the agent's prompts continue in the replayed conversation.
    agent_changelog_object_url: str | None = None
    #: Replay only the increments before this one (1 replays none; 3, the first two).
    agent_changelog_toolcall_position_exclusive: int | None = None
    #: The deploy_env step whose deployments of ``env_ids`` the agent uses (a filter: a step
    #: that did not deploy them is an error).
    env_step_id: str | None = None
    #: What an ``allowlist`` agent may reach besides its gateways: host names (``*.example.com``
    #: for the names under a domain) and CIDRs. The reference's object form sets them too.
    allow_hosts: list[str] = attrs.field(factory=list)
    allow_cidrs: list[str] = attrs.field(factory=list)
    disk_size_gb: float | None = None
    litellm_base_url: str | None = None
    enable_docker: bool = False

    @classmethod
    def adapt(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """``network_policy`` as an object ``{mode, allow_hosts, allow_cidrs}``: ``allow_all``
        is ``open``, an ``allowlist`` with nothing listed is ``sealed``; one that lists hosts
        is ``allowlist`` with them (``allow_all`` with a list is ``open`` with a list, which
        preflight refuses, as the reference does)."""
        policy = raw.get("network_policy")
        if not isinstance(policy, dict):
            return raw
        raw = dict(raw)
        hosts, cidrs = policy.get("allow_hosts") or [], policy.get("allow_cidrs") or []
        mode = policy.get("mode", "allow_all")
        if mode == "allowlist" and not hosts and not cidrs:
            raw["network_policy"] = "sealed"
        else:
            raw["network_policy"] = "open" if mode == "allow_all" else mode
            if hosts or cidrs:
                raw["allow_hosts"], raw["allow_cidrs"] = hosts, cidrs
        return raw

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.agent_name.strip():
            problems.append("agent_name must not be empty")
        problems.extend(self._unsupported(view))
        problems.extend(self._changelog_problems(view))
        problems.extend(_skill_problems(self.skills))
        if self.agent_snapshot_step and self.agent_snapshot_step not in view.step_ids:
            problems.append(f"agent_snapshot_step '{self.agent_snapshot_step}' names no step "
                            "of this task")
        if self.agent_snapshot_step and self.agent_snapshot_files_artifact_id:
            problems.append("give agent_snapshot_step or agent_snapshot_files_artifact_id, "
                            "not both")
        if not (self.agent_snapshot_step or self.agent_snapshot_files_artifact_id):
            for name in ("agent_snapshot_files_artifact_version",
                         "agent_snapshot_target_context_id"):
                if getattr(self, name) is not None:
                    problems.append(f"{name} needs a snapshot to load (agent_snapshot_step "
                                    "or agent_snapshot_files_artifact_id)")
        problems.extend(self.allowlist_problems())
        if self.network_policy not in AGENT_NETWORK_POLICIES:
            problems.append(f"network_policy must be one of {', '.join(AGENT_NETWORK_POLICIES)}"
                            f", not {self.network_policy!r}")
        elif self.network_policy in ("sealed", "allowlist"):
            store_fields = [name for name in ("agent_snapshot_step",
                                              "agent_snapshot_files_artifact_id",
                                              "enable_agent_changelog",
                                              "agent_changelog_object_url")
                            if getattr(self, name)]
            if store_fields:
                article = "an" if self.network_policy == "allowlist" else "a"
                problems.append(f"{', '.join(store_fields)}: the agent's state goes through "
                                f"the object store, which {article} {self.network_policy} agent "
                                'cannot reach; set network_policy = "open"')
        if len(set(self.env_ids)) != len(self.env_ids):
            problems.append("env_ids names an env twice")
        return problems

    def allowlist_problems(self) -> list[str]:
        from agentenv_agents.egress_proxy import cidr_problem, host_problem

        listed = [*self.allow_hosts, *self.allow_cidrs]
        if self.network_policy != "allowlist":
            if listed and self.network_policy in AGENT_NETWORK_POLICIES:
                return [f"allow_hosts/allow_cidrs ({', '.join(map(str, listed))}) need "
                        "network_policy allowlist (an open agent reaches every host, a sealed "
                        "one only its gateways)"]
            return []
        if not listed:
            return ["network_policy allowlist lists nothing: give allow_hosts or allow_cidrs "
                    '(or use "sealed", which reaches only the gateways)']
        problems = [f"allow_hosts: {why}" for h in self.allow_hosts
                    if (why := host_problem(h)) is not None]
        problems += [f"allow_cidrs: {why}" for c in self.allow_cidrs
                     if (why := cidr_problem(c)) is not None]
        return problems

    def _unsupported(self, view: PreflightView) -> list[str]:
        problems = []
        if self.env_step_id is not None and self.env_step_id not in view.step_ids:
            problems.append(f"env_step_id '{self.env_step_id}' names no step of this task")
        if self.env_step_id is not None and not self.env_ids:
            problems.append("env_step_id picks deployments of env_ids: give env_ids too")
        if self.disk_size_gb is not None:
            problems.append(f"disk_size_gb {self.disk_size_gb:g}: no sandbox provider here "
                            "sizes an agent's disk; leave it out")
        if self.litellm_base_url is not None:
            problems.append("litellm_base_url: agents reach models only through the run's "
                            "model gateway; set its upstream with [model] base_url instead")
        if self.enable_docker:
            problems.append("enable_docker: agents get no Docker daemon here; leave it out")
        return problems

    def needs(self, choices: RunChoices) -> list[str]:
        """The agent this step would deploy must be installed or stored."""
        from agent_env.api import UserError
        from agentenv_agents.lookup import find_agent

        override = self.choice_of(choices)
        agent_id = override or self.a2a_agent_id or default_agent_id()
        if agent_id is None:
            return []  # only an outside player can play it: said when the step runs
        try:
            find_agent(agent_id, None if override else self.a2a_agent_version)
        except UserError as exc:
            return [ChoiceProblem(exc) if override else str(exc)]
        return []

    def choice_of(self, choices: RunChoices) -> str | None:
        """The run's ``--agent``, which replaces this step's agent unless it deploys a judge."""
        return None if self.role == JUDGE_ROLE else choices.agent

    def _changelog_problems(self, view: PreflightView) -> list[str]:
        source, position = self.agent_changelog_object_url, \
            self.agent_changelog_toolcall_position_exclusive
        if source is None:
            return ["agent_changelog_toolcall_position_exclusive needs a changelog to replay "
                    "(agent_changelog_object_url)"] if position is not None else []
        problems = []
        if position is not None and (isinstance(position, bool) or position < 1):
            problems.append("agent_changelog_toolcall_position_exclusive must be 1 or more")
        if source.endswith("/"):
            problems.extend(_prefix_problems("agent_changelog_object_url", source))
        elif source not in view.step_ids:
            problems.append(f"agent_changelog_object_url '{source}' is neither a step of this "
                            "task nor an object-store prefix ending '/'")
        return problems

    def changelog_prefix(self, ctx: TaskContext) -> str:
        """Where this step's agent writes its changelog."""
        return (f"runs/{_safe_key(ctx.instance_id)}/agent_changelog/{_safe_key(self.id)}/"
                f"{_safe_key(self.agent_name)}/")

    def setup(self, ctx: TaskContext) -> AgentSetup:
        """The envs and sandbox this agent gets; StepError naming what is missing."""
        if self.agent_name in ctx.agents:
            raise StepError(f"an agent named '{self.agent_name}' is already deployed in this task")
        envs = {env_id: ctx.env(env_id) for env_id in self.env_ids}
        if self.env_step_id is not None:
            made = (ctx.outputs.get(self.env_step_id) or {}).get("instance_id")
            other = [e for e, d in envs.items() if getattr(d, "instance_id", None) != made]
            if other:
                raise StepError(f"env_step_id '{self.env_step_id}' names no deployment of "
                                f"{', '.join(other)}")
        sandbox = ctx.sandbox(self.sandbox_name) if self.sandbox_name else None
        return AgentSetup(self.agent_name, self.role, self.system_prompt, envs, sandbox,
                          self.sandbox_name, self.agent_description)

    async def start(self, ctx: TaskContext, setup: AgentSetup) -> Agent:
        """Deploy the agent ``a2a_agent_id`` names, through the agent type its folder names.

        ``agent-env run --agent ID`` (the run's ``agent`` metadata) replaces the step's own.
        """
        from agent_env.api import current
        from agentenv_agents.lookup import find_agent

        override = self.choice_of(ctx.choices)
        agent_id = override or self.a2a_agent_id or default_agent_id()
        if agent_id is None:
            raise StepError(
                f"agent '{self.agent_name}' has nothing to run it: the step names no "
                "a2a_agent_id, no [agents] default is configured, and no outside player plays "
                "it (play it from your own loop with agent_env.task.EpisodeSpec)"
            )
        # the step's version pins the step's own agent, not one --agent put in its place
        version = None if override else self.a2a_agent_version
        definition = find_agent(agent_id, version)
        agent_type: Any = current().host.lookup("agent_type", definition.type)
        agent: Agent = await agent_type.deploy(ctx, self, setup, definition)
        return agent

    async def run(self, ctx: TaskContext) -> None:
        setup = self.setup(ctx)
        agent = ctx.outside_agent(setup) or await self.start(ctx, setup)
        loaded = None
        if self.agent_snapshot_step or self.agent_snapshot_files_artifact_id:
            load = getattr(agent, "load_snapshot", None)
            if load is None:
                raise StepError(f"agent '{self.agent_name}' cannot load snapshots (only A2A "
                                "agents whose card lists snapshot/v1 can)")
            loaded = await load(self)
        replayed = None
        if self.agent_changelog_object_url:
            source: Any = self.agent_changelog_object_url
            if not source.endswith("/"):  # an earlier deploy_agent step's changelog
                source = (ctx.outputs.get(source) or {}).get("changelog_prefix")
                if not isinstance(source, str):
                    raise StepError(f"agent_changelog_object_url '{self.agent_changelog_object_url}"
                                    "' kept no changelog (set enable_agent_changelog on it)")
            replayed = await self._changelog_call(agent, "apply_changelog", source)
        prefix = None
        if self.enable_agent_changelog:
            prefix = self.changelog_prefix(ctx)
            await self._changelog_call(agent, "enable_changelog", prefix)
        ctx.agents[self.agent_name] = agent
        # the role is kept: steps acting for the agent (a trigger's executor) read it
        ctx.outputs[self.id] = {**agent.describe(),
                                **({"role": setup.role} if setup.role else {})}
        if loaded is not None:
            ctx.outputs[self.id]["snapshot_context_id"] = loaded
        if replayed is not None:
            ctx.outputs[self.id]["changelog_replayed"] = replayed
        if prefix is not None:
            ctx.outputs[self.id]["changelog_prefix"] = prefix

    async def _changelog_call(self, agent: Agent, method: str, prefix: str) -> Any:
        call = getattr(agent, method, None)
        if call is None:
            raise StepError(f"agent '{self.agent_name}' cannot keep or replay a changelog "
                            "(only A2A agents whose card lists snapshot/v1 can)")
        return await call(self, prefix)


#: ``prompt_agent`` keys an A2A agent receives over agent-config when its card supports them
#: (the reference's list); one the card does not take is an error naming it, never dropped.
AGENT_CONFIG_KEYS = ("model", "system_prompt", "effort", "harness", "max_turns",
                     "max_thinking_tokens", "output_format", "model_params", "agentenv_tools")
#: Who plays the user of a conversation unless ``user_agent_name`` says otherwise.
DEFAULT_USER_AGENT_NAME = "human_agent"
#: What a simulated user answers unless ``user_output_format`` says otherwise: its next message,
#: and whether the conversation is over.
USER_OUTPUT_FORMAT: dict[str, Any] = {"type": "json_schema", "json_schema": {
    "name": "user_turn", "schema": {
        "type": "object", "required": ["message", "done"],
        "properties": {"message": {"type": "string", "description": "Your next reply"},
                       "done": {"type": "boolean",
                                "description": "true when you are satisfied and the "
                                               "conversation should end"}}}}}
USER_SYSTEM = ("You play the user in a conversation with an assistant, to test it. Answer as "
               'that user would, with JSON only: {"message": "<your next reply>", "done": '
               "<true when you are satisfied and the conversation should end>}.")


@attrs.define(kw_only=True)
class PromptAgent(Step):
    """Send an agent a prompt and record its reply and trajectory."""

    type = "prompt_agent"
    agent_role = PROMPTS

    #: The prompt's text; or ``parts`` (A2A parts, e.g. ``{"kind": "text", "text": ...}``).
    prompt: str = ""
    parts: list[dict[str, Any]] | None = None
    agent_name: str = DEFAULT_AGENT_NAME
    #: What verifiers name this prompt by (default: this step's id).
    prompt_id: str | None = None
    #: Replaces the agent's system prompt from this prompt on (agent-config settings persist).
    system_prompt: str | None = None
    timeout_seconds: float = DEFAULT_PROMPT_TIMEOUT
    #: For model-backed agents; an outside player ignores it.
    model: str | None = None
    #: Agent-config settings (the reference's keys), sent when the agent's card takes them.
    effort: str | None = None
    harness: str | None = None
    max_turns: int | None = None
    max_thinking_tokens: int | None = None
    output_format: Any = None
    model_params: dict[str, Any] | None = None
    #: The A2A conversation this prompt continues (default: the agent's own one).
    context_id: str | None = None
    #: How often the agent's task is polled. Default: after 0.02 s, then each wait half as
    #: long again up to 0.2 s (the reference polls every 2 s).
    poll_interval_seconds: float | None = None
    #: Object-store prefix of the trajectory (default ``runs/<instance>/prompt_agent_
    #: trajectories/prompt_id=<id>/``); the file is ``trajectory-<agent>.json`` under it.
    trajectory_output_prefix: str | None = None
    #: Agent-config: which of the env's tools the agent may use (when its card takes it).
    agentenv_tools: list[str] | None = None
    #: Up to this many agent turns. After each but the last the user answers: the agent
    #: deployed as ``user_agent_name`` if there is one, else ``user_model`` asked through the
    #: model gateway; either may end the conversation (``{"message", "done"}``). The output's
    #: ``conversation`` holds both sides.
    max_conversation_turns: int = 1
    user_agent_name: str = DEFAULT_USER_AGENT_NAME
    user_model: str | None = None
    #: What the user agent is asked to answer in (default: ``{"message", "done"}`` JSON).
    user_output_format: Any = None
    user_agent_timeout_seconds: float = 600
    user_a2a_url: str | None = None
    snapshot_config: dict[str, Any] | None = None
    live_trajectory: bool = False

    @property
    def reply_id(self) -> str:
        return self.prompt_id or self.id

    @property
    def text(self) -> str:
        """The prompt as text: ``prompt``, or the text of ``parts``."""
        if self.prompt:
            return self.prompt
        return "\n".join(str(p.get("text", "")) for p in self.parts or []
                         if p.get("kind") == "text")

    def agent_config(self) -> dict[str, Any]:
        """The agent-config settings this prompt sets (those not None)."""
        return {key: getattr(self, key) for key in AGENT_CONFIG_KEYS
                if getattr(self, key) is not None}

    def needs(self, choices: RunChoices) -> list[str]:
        """The model this prompt asks for must have someone to answer it (a ``--model`` in
        its place is the kernel's to check)."""
        from agent_env.api import model_problem

        problem = model_problem(self.model) if self.model and not choices.model else None
        user = (model_problem(self.user_model) if self.user_model and not choices.user_model
                else None)
        return [p for p in (problem, user and f"user_model: {user}") if p]

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        if bool(self.prompt) == bool(self.parts):
            problems.append("give either 'prompt' (text) or 'parts' (A2A parts), not both")
        for index, part in enumerate(self.parts or []):
            if not isinstance(part, dict) or part.get("kind") not in ("text", "data", "file"):
                problems.append(f"parts[{index}] must be an A2A part with kind text, data or "
                                "file")
        if self.poll_interval_seconds is not None and not 0 < self.poll_interval_seconds <= 60:
            problems.append("poll_interval_seconds must be in (0, 60]")
        problems.extend(_prefix_problems("trajectory_output_prefix",
                                         self.trajectory_output_prefix))
        if isinstance(self.max_conversation_turns, bool) or self.max_conversation_turns < 1:
            problems.append("max_conversation_turns must be 1 or more")
        if self.user_agent_timeout_seconds <= 0:
            problems.append("user_agent_timeout_seconds must be positive")
        if self.user_agent_name == self.agent_name and self.max_conversation_turns > 1:
            problems.append(f"user_agent_name '{self.user_agent_name}' is the agent prompted; "
                            "the user must be another")
        if self.user_a2a_url is not None and not str(self.user_a2a_url).startswith(
                ("http://", "https://")):
            problems.append(f"user_a2a_url must be an http(s) URL, not {self.user_a2a_url!r}")
        if self.snapshot_config is not None:
            problems.append("snapshot_config: env snapshots between turns are not supported "
                            "here; leave it out")
        if self.live_trajectory:
            problems.append("live_trajectory: the trajectory is stored when the prompt ends "
                            "here, not streamed; leave it out")
        return problems

    def _user_model(self, ctx: TaskContext) -> str | None:
        """The model that plays the user: the run's ``--user-model``, else the step's, else
        ``[model] roles.user``."""
        from agent_env.api import model_settings

        return (ctx.choices.user_model or self.user_model
                or model_settings().model_for("user", or_default=False))

    def _user_url(self, ctx: TaskContext) -> str | None:
        """Where the user is reached over A2A: ``user_a2a_url``, else (no user agent deployed,
        no user model) ``[conversations] default_human_a2a_url``."""
        if self.user_a2a_url:
            return self.user_a2a_url
        if self.user_agent_name in ctx.agents or self._user_model(ctx):
            return None
        from agent_env.api import current

        url = current().config.section("conversations").get("default_human_a2a_url")
        return str(url) if url else None

    def _user_label(self, ctx: TaskContext) -> str:
        url = self._user_url(ctx)
        if url:
            return f"at {url}"
        if self.user_agent_name in ctx.agents:
            return f"agent '{self.user_agent_name}'"
        return f"simulated by {self._user_model(ctx)}"

    async def _scripted_user(self, ctx: TaskContext, turn: int, message: str,
                             firings: list[dict[str, Any]]) -> tuple[str, bool] | None:
        """What the user agent's triggers (``register_agent_triggers``) say at user turn
        ``turn``; None when it has none or none fires (its model answers then)."""
        from .trigger_steps import decide

        answer = await decide(ctx, self.user_agent_name, turn, message, self.reply_id)
        if not answer or not answer.get("fired"):
            return None
        firings.append({"turn": turn, "fired": answer["fired"], "done": bool(answer.get("done"))})
        text = "\n".join(str(p.get("text", "")) for p in answer.get("parts") or []
                         if isinstance(p, dict))
        return text, bool(answer.get("done"))

    async def _user_says(self, ctx: TaskContext, conversation: list[dict[str, Any]],
                         remote: A2aUser | None = None) -> tuple[str, bool] | None:
        """The user's next message and whether it ends the conversation; None when nobody
        plays the user (the conversation ends after the agent's turn). ``remote``: the user
        reached over A2A (:mod:`.a2a_user`), asked first."""
        import json

        user = ctx.agents.get(self.user_agent_name)
        if remote is not None:
            text = await remote.says(str(conversation[-1]["text"]),
                                     float(self.user_agent_timeout_seconds))
        elif user is not None:
            # none of the agent's own settings (its effort, its conversation) reach the user
            unset = dict.fromkeys(AGENT_CONFIG_KEYS)
            ask = attrs.evolve(self, **{**unset, "model": self._user_model(ctx),
                                        "output_format": self.user_output_format
                                        or USER_OUTPUT_FORMAT},
                               prompt=str(conversation[-1]["text"]), parts=None,
                               agent_name=self.user_agent_name, context_id=None,
                               prompt_id=f"{self.reply_id}.user", max_conversation_turns=1)
            reply = await user.prompt(ask, float(self.user_agent_timeout_seconds))
            if reply.error_type is not None:
                raise StepError(f"the user agent '{self.user_agent_name}' failed its turn "
                                f"({reply.error_type}): {reply.error_message or 'no message'}")
            text = reply.response
        elif self._user_model(ctx):
            from agent_env.api import chat

            # the simulator speaks as the user: its own lines are "assistant", the agent's
            # "user"; the task's opening prompt is context, not a line it said
            opening = (f"{USER_SYSTEM}\n\nYou opened the conversation with: "
                       f"{conversation[0]['text']}")
            messages = [{"role": "system", "content": opening}] + [
                {"role": "assistant" if turn["role"] == "user" else "user",
                 "content": str(turn["text"])} for turn in conversation[1:]]
            text = await chat(ctx, str(self._user_model(ctx)), messages,
                              timeout=float(self.user_agent_timeout_seconds),
                              who="the simulated user", role="user",
                              response_format=self.user_output_format or USER_OUTPUT_FORMAT)
        else:
            return None
        try:
            said = json.loads(text)
            return str(said["message"]), bool(said["done"])
        except (ValueError, KeyError, TypeError):
            return text, False  # not the JSON asked for: its text is the next message

    async def run(self, ctx: TaskContext) -> None:
        agent = ctx.agent(self.agent_name)
        started = time.monotonic()
        started_at = dt.datetime.now(dt.UTC)
        model = ctx.choices.model  # `agent-env run --model`: replaces the step's own
        step = attrs.evolve(self, model=model) if model else self
        timeout = float(self.timeout_seconds)
        reply = await agent.prompt(step, timeout)
        conversation: list[dict[str, Any]] = [{"role": "user", "text": self.text},
                                              {"role": "agent", "text": reply.response}]
        usage, trajectory, calls = reply.usage, list(reply.trajectory), list(reply.model_calls)
        turns = 1
        remote = None
        if self.max_conversation_turns > 1:
            url = self._user_url(ctx)
            remote = A2aUser(url) if url else None
        firings: list[dict[str, Any]] = []
        while turns < self.max_conversation_turns and reply.error_type is None:
            said = await self._scripted_user(ctx, turns + 1, reply.response, firings) \
                or await self._user_says(ctx, conversation, remote)
            if said is None:
                ctx.note(f"nobody plays the user (no agent '{self.user_agent_name}' is deployed, "
                         "the step names no user_model or user_a2a_url, and [conversations] "
                         "default_human_a2a_url is not set): the conversation ends here")
                break
            message, done = said
            conversation.append({"role": "user", "text": message, **({"done": True}
                                                                      if done else {})})
            ctx.note(f"the user ({self._user_label(ctx)}) said: {message[:100]}"
                     + (" (and ended the conversation)" if done else ""))
            if done:
                break
            turns += 1
            reply = await agent.prompt(attrs.evolve(step, prompt=message, parts=None), timeout)
            conversation.append({"role": "agent", "text": reply.response})
            usage = usage.plus(reply.usage)
            trajectory += reply.trajectory
            calls += reply.model_calls
        ctx.outputs[self.id] = {
            "prompt_id": self.reply_id, "agent_name": self.agent_name, "prompt": self.text,
            "response": reply.response, "model": reply.model or step.model,
            "a2a_context_id": reply.context_id,
            "tool_call_count": usage.tool_calls, "usage": attrs.asdict(usage),
            "error_type": reply.error_type, "error_message": reply.error_message,
            "agent_trajectory_object_key": store_trajectory(
                ctx, self.reply_id, self.agent_name, tuple(trajectory),
                self.trajectory_output_prefix),
            "trajectory_events": len(trajectory),
            "model_call_log_object_key": store_trajectory(
                ctx, self.reply_id, self.agent_name, tuple(calls),
                self.trajectory_output_prefix, name="model-calls"),
            "duration_seconds": round(time.monotonic() - started, 3),
            "started_at_utc": started_at.isoformat(),
        }
        if self.max_conversation_turns > 1:
            ctx.outputs[self.id]["conversation"] = conversation
            ctx.outputs[self.id]["conversation_turns"] = turns
        if firings:
            ctx.outputs[self.id]["agent_trigger_firings"] = firings
        if reply.error_type == INFRA_ERROR:
            raise InfraError(f"agent '{self.agent_name}' could not answer (infra_error): "
                             f"{reply.error_message or 'no message'}")
        if reply.error_type is not None:  # recorded and scored; said, so it is not missed
            ctx.note(f"agent '{self.agent_name}' failed the prompt ({reply.error_type}): "
                     f"{reply.error_message or 'no message'}")


@attrs.define(kw_only=True)
class SnapshotAgentState(Step):
    """Save an agent's conversation (and its workspace) through snapshot/v1 into the run's
    object store, so a later ``deploy_agent`` (``agent_snapshot_step``) starts from it. Needs
    an A2A agent whose card lists snapshot/v1, deployed ``open``, and a store that signs URLs
    (S3, GCS)."""

    type = "snapshot_agent_state"
    example = {
        'id': 'snap',
        'type': 'snapshot_agent_state',
        'agent_name': 'agent',
        'prompt_id': 'ask',
    }

    agent_name: str = DEFAULT_AGENT_NAME
    #: The A2A conversation to save (default: the agent's own one).
    context_id: str | None = None
    #: Also save the agent's workspace folder (as ``workspace.tar``).
    include_workspace: bool = True
    #: Object-store prefix (default ``runs/<instance>/agent_snapshots/<step id>/<agent>/``).
    output_prefix: str | None = None
    #: Save the conversation this prompt was answered in (its ``a2a_context_id``).
    prompt_id: str | None = None
    timeout_seconds: float = 120
    artifact_id: str | None = None
    env_id: str | None = None
    universe_artifact_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view) + _prefix_problems("output_prefix", self.output_prefix)
        if self.prompt_id is not None and self.context_id is not None:
            problems.append("give prompt_id or context_id, not both")
        if self.timeout_seconds <= 0:
            problems.append("timeout_seconds must be positive")
        for key in ("artifact_id", "universe_artifact_id"):
            if getattr(self, key) is not None:
                problems.append(f"{key}: snapshots are saved under the run's object-store "
                                "prefix (output_prefix), not as file-artifact universes, here; "
                                "leave it out")
        if self.env_id is not None:
            problems.append("env_id: saving an env's service state beside the agent's is not "
                            "supported here; leave it out")
        return problems

    def prefix(self, ctx: TaskContext) -> str:
        if self.output_prefix is not None:
            return self.output_prefix.rstrip("/") + "/"
        return (f"runs/{_safe_key(ctx.instance_id)}/agent_snapshots/{_safe_key(self.id)}/"
                f"{_safe_key(self.agent_name)}/")

    async def run(self, ctx: TaskContext) -> None:
        agent = ctx.agent(self.agent_name)
        save = getattr(agent, "save_snapshot", None)
        if save is None:
            raise StepError(f"agent '{self.agent_name}' cannot save snapshots (only A2A agents "
                            "whose card lists snapshot/v1 can)")
        step = self
        if self.prompt_id is not None:
            from agent_env.api import find_reply

            reply = find_reply(ctx, self.prompt_id)
            if reply is None or not reply.get("a2a_context_id"):
                raise StepError(f"no conversation of prompt '{self.prompt_id}' is recorded")
            step = attrs.evolve(self, context_id=str(reply["a2a_context_id"]))
        try:
            saved = await asyncio.wait_for(save(step, self.prefix(ctx)),
                                           float(self.timeout_seconds))
        except TimeoutError:
            raise StepError(f"agent '{self.agent_name}' did not save its snapshot within "
                            f"{self.timeout_seconds:g}s") from None
        ctx.outputs[self.id] = {"agent_name": self.agent_name, **saved}


def _prefix_problems(field: str, prefix: str | None) -> list[str]:
    """Whether ``prefix`` (an object-store key prefix, None for the default) is a valid one."""
    if prefix is None:
        return []
    from agent_env.api import InvalidObjectKey, validate_key

    try:
        validate_key(prefix.rstrip("/") + "/x")
    except InvalidObjectKey as exc:
        return [f"{field}: {exc}"]
    return []


def _safe_key(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip(".") or "_"


def _skill_problems(skills: Any) -> list[str]:
    """What is wrong with deploy_agent's ``skills`` (each one named by its position); names
    follow skill-config/v1's rule, as the agent will."""
    from agentenv_protocol.agent.skills import NAME as _SKILL_NAME

    if not isinstance(skills, list):
        return ["skills must be a list of {name, description, skill_md} or {artifact_id}"]
    problems = []
    names: set[str] = set()
    for i, entry in enumerate(skills):
        where = f"skills[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where} must be an object")
            continue
        unknown = sorted(set(entry) - {"name", "description", "skill_md", "artifact_id"})
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
        if ("skill_md" in entry) == ("artifact_id" in entry):
            problems.append(f"{where} needs exactly one of skill_md or artifact_id")
            continue
        name = entry.get("name")
        if name is None and "skill_md" in entry:
            problems.append(f"{where} needs a name")
            continue
        if name is None:
            name = str(entry["artifact_id"]).rsplit("/", 1)[-1]
        if not isinstance(name, str) or not _SKILL_NAME.match(name):
            problems.append(f"{where}: name must match {_SKILL_NAME.pattern}, got {name!r}")
        elif name in names:
            problems.append(f"{where}: a skill named {name!r} is given twice")
        names.add(str(name))
        for key in ("description", "skill_md", "artifact_id"):
            if key in entry and not isinstance(entry[key], str):
                problems.append(f"{where}: {key} must be a string")
    return problems


def trajectory_key(instance_id: str, prompt_id: str, agent_name: str,
                   prefix: str | None = None, name: str = "trajectory") -> str:
    """Where the trajectory of one prompt is kept in the object store."""
    if prefix is None:
        prefix = (f"runs/{_safe_key(instance_id)}/{TRAJECTORY_PREFIX}/"
                  f"prompt_id={_safe_key(prompt_id)}/")
    elif not prefix.endswith("/"):
        prefix += "/"
    return f"{prefix}{name}-{_safe_key(agent_name)}.json"


def store_trajectory(ctx: TaskContext, prompt_id: str, agent_name: str,
                     trajectory: Any, prefix: str | None = None,
                     name: str = "trajectory") -> str | None:
    """Write the prompt's trajectory (or, ``name="model-calls"``, its model-call log; secrets
    stripped) to the object store; its key, or None when there is nothing to keep. A second
    prompt with the same id (a retried step) replaces the first one's."""
    if not trajectory:
        return None
    import json

    from agent_env.api import current

    key = trajectory_key(ctx.instance_id, prompt_id, agent_name, prefix, name)
    data = json.dumps(ctx.strip_secrets(list(trajectory)), default=str).encode()
    current().store("object").put(key, data, content_type="application/json",
                                  allow_overwrite=True)
    return key


def read_trajectory(key: str) -> list[dict[str, Any]]:
    """A stored prompt trajectory (see :func:`store_trajectory`)."""
    import json

    from agent_env.api import current

    events: list[dict[str, Any]] = json.loads(current().store("object").get(key))
    return events


def _regex_flags(names: Any) -> int:
    if names is None:
        return re.DOTALL
    flags = 0
    for name in names:
        flags |= getattr(re, name)
    return flags


@attrs.define(kw_only=True)
class AgentPromptResponseVerifier(Step):
    """Score the reply to one prompt with string and regex checks."""

    type = "agent_prompt_response_verifier"
    agent_role = READS_REPLY

    prompt_id: str
    criteria: list[dict[str, Any]] = attrs.field(factory=list)
    score_aggregator: str = "all_pass"
    verifier_id: str | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.score_aggregator not in AGGREGATORS:
            problems.append(f"score_aggregator '{self.score_aggregator}' is not known "
                            f"(known: {', '.join(AGGREGATORS)})")
        if not self.criteria:
            problems.append("criteria is empty (give response_contains or "
                            "response_regex_present checks)")
        for index, criterion in enumerate(self.criteria):
            problems.extend(_criterion_problems(index, criterion))
        return problems

    async def run(self, ctx: TaskContext) -> None:
        reply = find_reply(ctx, self.prompt_id)
        if reply is None:
            answered = sorted(str(o.get("prompt_id")) for o in ctx.outputs.values()
                              if isinstance(o, dict) and "response" in o)
            raise StepError(f"no reply to prompt '{self.prompt_id}' is recorded (replies: "
                            f"{', '.join(answered) or 'none'})")
        if reply.get("error_type"):
            why = (f"the agent failed the prompt ({reply['error_type']}): "
                   f"{reply.get('error_message') or 'no message'}")
            rows = [ScoreRow(0, 0.0, False, why, criterion={"id": "prompt_error"})]
        else:
            response = str(reply.get("response") or "")
            rows = [_score(index, criterion, response)
                    for index, criterion in enumerate(self.criteria)]
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)


#: What an A2A agent card must hold (A2A's AgentCard required fields); ``capabilities`` and
#: ``skills`` must also have the right shape.
CARD_FIELDS = ("name", "description", "url", "version", "capabilities", "defaultInputModes",
               "defaultOutputModes", "skills")


@attrs.define(kw_only=True)
class VerifyAgentCard(Step):
    """Score a deployed agent's A2A card: its required fields, and the extensions it must
    declare (by a part of their URI, e.g. ``mcp-config``). ``a2a-agent validate`` runs it."""

    type = "verify_agent_card"
    example = {'id': 'card', 'type': 'verify_agent_card', 'agent_name': 'agent'}

    agent_name: str = DEFAULT_AGENT_NAME
    extensions: list[str] = attrs.field(factory=list)
    score_aggregator: str = "all_pass"
    verifier_id: str | None = None

    async def run(self, ctx: TaskContext) -> None:
        agent = ctx.agent(self.agent_name)
        card = getattr(agent, "card", None)
        if not isinstance(card, dict):
            raise StepError(f"agent '{self.agent_name}' has no A2A card (an outside player?)")
        rows = []
        for index, field in enumerate(CARD_FIELDS):
            value = card.get(field)
            shape = {"capabilities": dict, "skills": list, "defaultInputModes": list,
                     "defaultOutputModes": list}.get(field, str)
            good = isinstance(value, shape) and (shape is not str or bool(value))
            why = (f"card has {field}" if good else
                   f"card's {field} is {'missing' if value is None else 'not a ' + shape.__name__}")
            rows.append(ScoreRow(index, float(good), good, why,
                                 criterion={"id": f"card.{field}"}))
        capabilities = card.get("capabilities")
        listed = capabilities.get("extensions") if isinstance(capabilities, dict) else None
        declared = [str(e.get("uri", "")) for e in listed if isinstance(e, dict)] if isinstance(
            listed, list) else []
        for offset, wanted in enumerate(self.extensions, start=len(rows)):
            found = [uri for uri in declared if wanted in uri]
            why = (f"declares {found[0]}" if found else
                   f"declares no '{wanted}' extension (it declares: "
                   f"{', '.join(declared) or 'none'})")
            rows.append(ScoreRow(offset, float(bool(found)), bool(found), why,
                                 criterion={"id": f"extension.{wanted}"}))
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)


def _criterion_problems(index: int, criterion: Any) -> list[str]:
    where = f"criteria[{index}]"
    if not isinstance(criterion, dict):
        return [f"{where} must be an object"]
    kind = criterion.get("type")
    if kind in SANDBOX_CHECKS:
        return []
    if kind not in RESPONSE_CHECKS:
        return [f"{where}: '{kind}' is not a response check (known: "
                f"{', '.join(RESPONSE_CHECKS)})"]
    if kind == "response_contains":
        needles = criterion.get("needles")
        if not (isinstance(needles, list) and needles and
                all(isinstance(n, str) and n for n in needles)):
            return [f"{where} (response_contains) needs 'needles', a list of strings"]
        return []
    pattern = criterion.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        return [f"{where} (response_regex_present) needs 'pattern', a regex"]
    flags = criterion.get("flags")
    if flags is not None and not (isinstance(flags, list) and all(
            isinstance(f, str) and isinstance(getattr(re, f, None), re.RegexFlag)
            for f in flags)):
        return [f"{where}: 'flags' must list re flag names (e.g. [\"IGNORECASE\"])"]
    try:
        re.compile(pattern, _regex_flags(flags))
    except re.error as exc:
        return [f"{where}: 'pattern' is not a valid regex ({exc})"]
    return []


def _score(index: int, criterion: dict[str, Any], response: str) -> ScoreRow:
    kind = criterion.get("type")
    weight = float(criterion.get("weight", 1.0))
    if kind == "response_contains":
        missing = [n for n in criterion["needles"] if n not in response]
        passed = not missing
        why = "every needle is in the reply" if passed else f"the reply lacks {missing}"
    elif kind == "response_regex_present":
        pattern = criterion["pattern"]
        passed = re.search(pattern, response, _regex_flags(criterion.get("flags"))) is not None
        why = f"the reply matches {pattern!r}" if passed else f"no match for {pattern!r}"
    else:
        return ScoreRow(index, 0.0, False, f"'{kind}' is not checked by this verifier",
                        skipped=True, weight=weight, criterion=criterion)
    return ScoreRow(index, 1.0 if passed else 0.0, passed, why, weight=weight,
                    criterion=criterion)

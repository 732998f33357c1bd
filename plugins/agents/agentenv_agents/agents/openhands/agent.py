"""OpenHands as an A2A agent: the OpenHands SDK's agent (``openhands-sdk`` with the default tools
of ``openhands-tools``: terminal, file editor, task tracker), run once per prompt in a process
of its own.

Built on AgentEnv's A2A agent SDK (:class:`~agentenv_protocol.agent.EpisodeAgent`). Each prompt
gets its own ``python agent.py --episode`` process, the job on its stdin, started one prompt
ahead so the SDK's imports (seconds) are done when the prompt comes. That process builds the
SDK's ``Agent``:

- its ``LLM`` is ``openai/<model>`` at ``AGENTENV_MODEL_BASE_URL`` with the per-run token: the
  run's model gateway is its only model endpoint, and no provider key is ever in this
  container;
- the envs' MCP servers (``/ext/mcp-config``) are its ``mcp_config``: OpenHands has an MCP
  client, so the env's tools are tools the model calls by their own names;
- a ``system_prompt`` replaces the SDK's; skills (``/ext/skill-config``) are loaded from
  ``~/.openhands-skills`` into its context;
- the browser tool is left out (no browser in this image), and the terminal runs commands as
  subprocesses (no tmux).

It then runs one ``Conversation`` in the work folder: the A2A context's conversation, persisted
under ``~/.openhands-conversations`` with an id derived from the context, so a later prompt in
the same context resumes it (and a snapshot carries it). Every SDK event is printed as one JSON
line.

The reply is the agent's final response (its ``finish`` message, or a last message without tool
calls). A run that ends in error, gets stuck, reaches its iteration limit (``max_turns``) or
finishes without text fails the turn (``agent_error``), as does a model call the endpoint refuses
(an HTTP 400); the endpoint failing (auth, rate limits or outages past the SDK's own retries) is
an ``infra_error``. Either names the SDK's error.

Trajectory (format ``openhands-events/1``): an ``agentenv.cli`` event, then every SDK event
(``openhands.event``: its ``kind`` and the event as the SDK serializes it), then
``openhands.exit`` (status, reply, tokens, cost, error). Usage counts one tool call per action
and the tokens and cost of the agent's LLMs.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

from agentenv_protocol.agent import (
    AGENT_CONFIG_V1,
    MCP_CONFIG_V1,
    SKILL_CONFIG_V1,
    SNAPSHOT_V1,
    TRAJECTORY_V1,
    AgentIdentity,
    CliAgentConfig,
    EpisodeAgent,
    TaskRequest,
    TaskResult,
    a2a_agent,
    package_version,
    write_skills,
)

TRAJECTORY_FORMAT = "openhands-events/1"
CONVERSATIONS = Path.home() / ".openhands-conversations"
SKILLS = Path.home() / ".openhands-skills"
#: A context's conversation id is derived from the context id, so it is found again.
CONTEXTS = uuid.uuid5(uuid.NAMESPACE_URL, "urn:agentenv:agents:openhands")
#: The SDK's failure kinds (``FailureKind``) that are an ``infra_error``: the model endpoint's.
INFRA_FAILURES = {"auth", "rate_limit", "transient", "internal"}


@a2a_agent(
    identity=AgentIdentity(name="openhands", version=package_version("openhands-sdk"),
                           description="OpenHands (terminal, file editor) with its envs' MCP "
                                       "tools."),
    config=CliAgentConfig,
    extensions=(AGENT_CONFIG_V1, MCP_CONFIG_V1, SKILL_CONFIG_V1, SNAPSHOT_V1, TRAJECTORY_V1),
)
class OpenHandsAgent(EpisodeAgent):
    trajectory_format = TRAJECTORY_FORMAT
    cli_name = "openhands"
    version = package_version("openhands-sdk")
    turns_default = 100
    session_folders = (".openhands-conversations",)

    async def run(self, request: TaskRequest[CliAgentConfig]) -> TaskResult:
        model = self.model_for(request)
        if model is None:
            return self.no_model()
        trajectory = request.trajectory
        # a context loaded from a snapshot goes on in the conversation it was saved with
        known = self.sessions.get(request.context_id)
        conversation = uuid.UUID(known) if known else uuid.uuid5(CONTEXTS, request.context_id)
        resumed = (CONVERSATIONS / conversation.hex).is_dir()
        SKILLS.mkdir(parents=True, exist_ok=True)
        write_skills(request.skills, SKILLS)
        job = {"task": request.text, "model": model, "base_url": self.base_url,
               "mcp_servers": {name: {"url": s.url, "headers": dict(s.headers)}
                               for name, s in request.mcp_servers.items()},
               "skills": sorted(request.skills), "system_prompt": request.config.system_prompt,
               "max_iterations": self.max_turns(request), "conversation_id": str(conversation),
               "cwd": str(self.workdir)}
        self.begin(request, self.process.args, model=model, session=str(conversation),
                   resumed=resumed)
        ended: dict[str, Any] | None = None
        async with await self.start_episode(request, job) as run:
            async for event in run.events():
                trajectory.append(event)
                if event.get("type") == "openhands.event" and event.get("kind") == "ActionEvent":
                    request.usage.add_tool_call()
                elif event.get("type") == "openhands.exit":
                    ended = event
            code = await run.wait()
        if (CONVERSATIONS / conversation.hex).is_dir():
            self.sessions[request.context_id] = conversation.hex
        if ended is None or code != 0:
            return self.ended_early(code, run)
        self.add_usage(request, ended, "input_tokens", "output_tokens")
        status = str(ended.get("status") or "")
        error = str(ended.get("error") or "").strip()
        if ended.get("infra"):
            return TaskResult.failure(f"OpenHands' model endpoint failed: {error[:1000]}",
                                      code="openhands.model_error", error_type="infra_error")
        if status != "finished":
            return TaskResult.failure(f"OpenHands stopped with status {status!r}"
                                      + (f": {error[:1000]}" if error else ""),
                                      code=f"openhands.{status or 'failed'}")
        reply = str(ended.get("reply") or "").strip()
        if not reply:
            return TaskResult.failure("OpenHands finished without a reply",
                                      code="openhands.empty_answer")
        return TaskResult(text=reply)


def emit(event: dict[str, Any]) -> None:
    import json

    sys.__stdout__.write(json.dumps(event, default=str) + "\n")  # type: ignore[union-attr]
    sys.__stdout__.flush()  # type: ignore[union-attr]


def episode() -> int:
    """The prompt's process: one run of the context's OpenHands conversation, the job read from
    stdin, JSON lines out. The SDK is imported (seconds) before the job is read, so a process
    started ahead of its prompt has done that by the time the prompt comes. Whatever the SDK
    prints goes to stderr."""
    import json

    sys.stdout = sys.stderr
    from openhands.sdk import LLM, Agent, AgentContext, Conversation, Message, TextContent
    from openhands.sdk.conversation.exceptions import ConversationRunError
    from openhands.sdk.conversation.response_utils import get_agent_final_response
    from openhands.sdk.event import ActionEvent, Event
    from openhands.sdk.event.conversation_error import ConversationErrorEvent
    from openhands.sdk.mcp import MCPServer
    from openhands.sdk.skills.skill import load_skills_from_dir
    from openhands.tools.preset.default import get_default_condenser, get_default_tools
    from pydantic import SecretStr

    job = json.load(sys.stdin)
    llm = LLM(usage_id="agent", model=f"openai/{job['model']}", base_url=job["base_url"],
              api_key=SecretStr(os.environ.get("AGENTENV_MODEL_TOKEN", "")))
    skills = []
    if job["skills"]:
        skills = [skill for group in load_skills_from_dir(SKILLS) for skill in group.values()
                  if skill.name in job["skills"]]
        # The SDK skips a skill it cannot parse (a YAML error in its front matter) with a log
        # line only: the trajectory says which.
        missing = sorted(set(job["skills"]) - {skill.name for skill in skills})
        if missing:
            emit({"type": "openhands.skills_not_loaded", "skills": missing})
    # Literal: a ${VAR} in a URL or header is sent as written, never filled from this process.
    mcp = {name: MCPServer(url=server["url"], transport="http",
                           headers=server["headers"] or None).as_literal()
           for name, server in job["mcp_servers"].items()}
    agent = Agent(
        llm=llm, tools=get_default_tools(enable_browser=False), mcp_config=mcp,
        condenser=get_default_condenser(llm=llm.model_copy(update={"usage_id": "condenser"})),
        agent_context=AgentContext(skills=skills, load_user_skills=False,
                                   load_public_skills=False),
        **({"system_prompt": job["system_prompt"]} if job["system_prompt"] else {}))
    errors: list[str] = []

    def on_event(event: Event) -> None:
        if isinstance(event, ConversationErrorEvent):
            errors.append(f"{event.code}: {event.detail}")
        emit({"type": "openhands.event", "kind": type(event).__name__,
              **event.model_dump(mode="json")})

    CONVERSATIONS.mkdir(parents=True, exist_ok=True)
    conversation = Conversation(
        agent=agent, workspace=job["cwd"], persistence_dir=str(CONVERSATIONS),
        conversation_id=uuid.UUID(job["conversation_id"]), callbacks=[on_event],
        max_iteration_per_run=int(job["max_iterations"]), visualizer=None,
        delete_on_close=False)
    ended: dict[str, Any] = {"type": "openhands.exit"}
    try:
        conversation.send_message(Message(role="user", content=[TextContent(text=job["task"])]))
        conversation.run()
    except ConversationRunError as exc:
        error = exc.conversation_error
        kind = error.classify().classification.kind if error is not None else None
        # The endpoint itself failing (refused auth, rate limits and outages past the SDK's
        # retries) is the run's infrastructure; a request the model refused, the agent's.
        ended["infra"] = str(kind) in INFRA_FAILURES
        errors.append(f"{type(exc.original_exception).__name__}: {exc.original_exception}")
    status = conversation.state.execution_status
    ended["status"] = status.value
    ended["reply"] = get_agent_final_response(conversation.state.events)
    actions = sum(isinstance(e, ActionEvent) for e in conversation.state.events)
    metrics = llm.metrics
    usage = metrics.accumulated_token_usage
    ended.update(input_tokens=getattr(usage, "prompt_tokens", 0),
                 output_tokens=getattr(usage, "completion_tokens", 0),
                 cost=metrics.accumulated_cost, actions=actions,
                 error="; ".join(errors[-3:]))
    emit(ended)
    conversation.close()
    return 0


if __name__ == "__main__":
    OpenHandsAgent.main(episode)

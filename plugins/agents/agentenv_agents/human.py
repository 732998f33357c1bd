"""``deploy_human_agent``: a person plays an agent.

Why: some evals need a person in the conversation (a user who answers the agent's questions, a
colleague who reviews a draft), and env authors want to try their env's tools by hand through
the same run an agent would do. The step registers an agent under ``agent_name`` (default
``human_agent``, the name ``prompt_agent`` asks for a conversation's user) that any prompt step
can prompt:

* with ``a2a_url`` (the reference's key), or ``[conversations] default_human_a2a_url``, the
  person is reached over A2A at that URL (a human-in-the-loop hub), the configured one
  run-scoped as ``<url>/instance/<instance id>`` as the reference does;
* otherwise each prompt is an *ask* (:mod:`agent_env.asks`) that waits in the explorer's inbox
  (``agent-env up``, then *Inbox*) and for ``agent-env task answer``: the person reads the
  prompt, may call the tools of the envs in ``env_ids`` (as ``role``; the run makes each call
  through the env's gateway, so the deployment's token never leaves the run) and answers. Each
  call is in the reply's trajectory. Nobody answering within the prompt's timeout fails the
  prompt, naming the ask; Ctrl-C cancels the ask.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import (
    AgentReply,
    PreflightView,
    Step,
    StepError,
    Usage,
)

if TYPE_CHECKING:
    from agent_env.api import TaskContext

DEFAULT_HUMAN_NAME = "human_agent"


@attrs.define(eq=False)
class InboxHuman:
    """A person answering asks in the explorer or with ``agent-env task answer``."""

    name: str
    ctx: Any
    envs: dict[str, Any]
    role: str | None
    poll_seconds: float = 0.5

    def _headers(self, deployment: Any) -> dict[str, str]:
        return {**deployment.headers, **({"AgentEnv-Role": self.role} if self.role else {})}

    async def _tools(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The tools the person may call, and which env serves each."""
        from agentenv_protocol.client import McpClient

        tools: list[dict[str, Any]] = []
        where: dict[str, Any] = {}
        for env_id, deployment in self.envs.items():
            async with McpClient(f"{deployment.url}/mcp", headers=self._headers(deployment),
                                 timeout=30) as client:
                for tool in await client.list_tools():
                    if tool.name not in where:
                        where[tool.name] = deployment
                        tools.append({"name": tool.name, "env": env_id,
                                      "description": tool.description or "",
                                      "input_schema": tool.input_schema})
        return tools, where

    async def _call(self, deployment: Any, name: str, arguments: dict[str, Any]
                    ) -> tuple[str, bool]:
        from agentenv_protocol.client import McpClient
        from agentenv_protocol.errors import ProtocolError, TransportError

        try:
            async with McpClient(f"{deployment.url}/mcp", headers=self._headers(deployment),
                                 timeout=60) as client:
                result = await client.call_tool(name, arguments)
        except (ProtocolError, TransportError) as exc:
            return f"the call failed: {exc}", True
        return result.text, bool(result.is_error)

    async def prompt(self, step: Any, timeout: float) -> AgentReply:
        from agent_env.api import ASK_ANSWERED, ASK_AWAITING, ASK_CANCELLED, ASK_EXPIRED, asks

        store = asks()
        tools, where = await self._tools()
        ask = await asyncio.to_thread(store.open, self.ctx.instance_id, self.name, step.text,
                                      tools)
        self.ctx.note(f"'{self.name}' waits for a person: answer in the explorer's inbox "
                      f"(agent-env up) or with agent-env task answer --ask {ask.ask_id} "
                      "--text ...")
        deadline = time.monotonic() + timeout
        trajectory: list[dict[str, Any]] = []
        try:
            while True:
                for call in await asyncio.to_thread(store.calls, ask.ask_id, "requested"):
                    text, failed = await self._call(where[call.name], call.name,
                                                    call.arguments)
                    await asyncio.to_thread(store.complete_call, call, text, failed)
                    trajectory.append({"type": "tool_call", "tool": call.name,
                                       "arguments": call.arguments, "result": text[:4000],
                                       "is_error": failed, "by": call.requested_by})
                found = await asyncio.to_thread(store.get, ask.ask_id)
                if found is None or found.state != ASK_AWAITING:
                    break
                if time.monotonic() >= deadline:
                    with contextlib.suppress(ValueError):
                        await asyncio.to_thread(store.close, ask.ask_id, ASK_EXPIRED)
                    raise StepError(f"nobody answered ask {ask.ask_id} of '{self.name}' within "
                                    f"{timeout:g}s")
                await asyncio.sleep(self.poll_seconds)
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):
                store.close(ask.ask_id, ASK_CANCELLED)
            raise
        if found is None or found.state != ASK_ANSWERED:
            raise StepError(f"ask {ask.ask_id} of '{self.name}' ended "
                            f"{found.state if found else 'missing'} without an answer")
        trajectory.append({"type": "answer", "text": found.answer, "by": found.answered_by})
        return AgentReply(str(found.answer or ""), tuple(trajectory),
                          Usage(tool_calls=sum(1 for e in trajectory
                                               if e["type"] == "tool_call")))

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name, "type": "human", "answered_in": "inbox",
                "envs": list(self.envs), **({"role": self.role} if self.role else {})}


@attrs.define(eq=False)
class RemoteHuman:
    """A person reached over A2A at ``url`` (a human-in-the-loop hub)."""

    name: str
    url: str

    async def prompt(self, step: Any, timeout: float) -> AgentReply:
        from .a2a_user import A2aUser

        return AgentReply(await A2aUser(self.url).says(step.text, timeout))

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name, "type": "human", "a2a_url": self.url}


@attrs.define(kw_only=True)
class DeployHumanAgent(Step):
    """Register a person as the agent ``agent_name`` (see the module)."""

    type = "deploy_human_agent"
    example = {
        'id': 'operator',
        'type': 'deploy_human_agent',
        'env_ids': ['notes'],
        'role': 'operator',
    }
    entity_fields = {"env_ids": "envs"}

    agent_name: str = DEFAULT_HUMAN_NAME
    a2a_url: str | None = None
    #: Ours: the envs whose tools the person may call from the inbox, and as which role.
    env_ids: list[str] = attrs.field(factory=list)
    role: str | None = None
    poll_interval_seconds: float = 0.5

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.a2a_url is not None and not self.a2a_url.startswith(("http://", "https://")):
            problems.append(f"a2a_url must be an http(s) URL, not {self.a2a_url!r}")
        if self.a2a_url and self.env_ids:
            problems.append("env_ids: a person reached over A2A calls no env tools through the "
                            "run; leave env_ids out or a2a_url out")
        if self.poll_interval_seconds <= 0:
            problems.append("poll_interval_seconds must be positive")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agent_env.api import current

        if self.agent_name in ctx.agents:
            raise StepError(f"an agent named '{self.agent_name}' is already deployed in this "
                            "task")
        url = self.a2a_url
        if url is None and not self.env_ids:
            base = current().config.section("conversations").get("default_human_a2a_url")
            url = f"{str(base).rstrip('/')}/instance/{ctx.instance_id}" if base else None
        agent: Any = RemoteHuman(self.agent_name, url) if url else InboxHuman(
            self.agent_name, ctx, {e: ctx.env(e) for e in self.env_ids}, self.role,
            float(self.poll_interval_seconds))
        ctx.agents[self.agent_name] = agent
        ctx.outputs[self.id] = agent.describe()

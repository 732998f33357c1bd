"""Turns: an outside player's answer to one prompt, and the tools it may use meanwhile.

:class:`OutsideAgent` is what ``deploy_agent`` puts in ``ctx.agents`` for a trainer's agent:
when ``prompt_agent`` prompts it, it opens a :class:`Turn` on its episode and waits until the
player ends it, or until the deadline (``turn_timeout``, else the step's ``timeout_seconds``).

``turn.tools()`` opens one MCP session per env the agent was given, through that env's gateway,
as the agent's role (``AgentEnv-Role`` header for listing, ``_meta`` role and session on every
call, so the env sees who called), and lists the tools once. A name two envs offer is refused:
the player could not say which one it meant.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from agent_env.agents import AgentPrompt, AgentReply, AgentSetup
from agent_env.episodes.errors import EpisodeError
from agent_env.tasks.steps import StepError
from agentenv_protocol.wire import ROLE_HEADER, ROLE_META_KEY, SESSION_META_KEY

if TYPE_CHECKING:
    from agent_env.sandbox.base import Sandbox

OPEN, ENDED, TIMED_OUT, ABANDONED = "open", "ended", "timed out", "abandoned"
#: How much of a tool result the trajectory keeps per call.
TRAJECTORY_TEXT_LIMIT = 2000
BASH_TOOL = "bash"
DEFAULT_BASH_TIMEOUT = 120.0


class TurnDesk(Protocol):
    """Where an outside agent opens its turns: the episode."""

    id: str
    turn_timeout: float | None

    def open_turn(self, turn: Turn) -> None: ...

    def turn_changed(self, turn: Turn) -> None: ...


class OutsideAgent:
    """Stands in for a deployed agent; its prompts become turns of an outside player."""

    def __init__(self, desk: TurnDesk, setup: AgentSetup) -> None:
        self.desk = desk
        self.setup = setup
        self.name = setup.name

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name, "played_by": "outside", "role": self.setup.role,
                "env_ids": list(self.setup.envs), "sandbox_name": self.setup.sandbox_name}

    async def prompt(self, step: AgentPrompt, timeout: float) -> AgentReply:
        timeout = float(self.desk.turn_timeout or timeout)
        system_prompt = step.system_prompt if step.system_prompt is not None \
            else self.setup.system_prompt
        turn = Turn(self.desk, self.setup, step.id, step.text, system_prompt, timeout)
        self.desk.open_turn(turn)
        try:
            done, _ = await asyncio.wait({turn.ended}, timeout=timeout)
        except asyncio.CancelledError:
            turn.close(ABANDONED)
            raise
        if not done:
            turn.close(TIMED_OUT)
            raise StepError(f"turn '{step.id}' of agent '{self.name}' was not ended within "
                            f"{timeout:g}s")
        return AgentReply(turn.response or "", tuple(turn.trajectory))


class Turn:
    """One prompt to a trainer's agent, open until :meth:`end` (or its deadline)."""

    def __init__(self, desk: TurnDesk, setup: AgentSetup, step_id: str, prompt: str,
                 system_prompt: str | None, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self._desk = desk
        self._setup = setup
        self.agent = setup.name
        self.step_id = step_id
        self.prompt = prompt
        self.system_prompt = system_prompt
        self.role = setup.role
        self.timeout_seconds = timeout
        self.deadline = loop.time() + timeout
        self.state = OPEN
        self.response: str | None = None
        #: The tool calls made in this turn: ``{tool, arguments, is_error, seconds, text}``.
        self.trajectory: list[dict[str, Any]] = []
        self.ended: asyncio.Future[None] = loop.create_future()
        self.handed_out = False

    def __repr__(self) -> str:
        return f"<Turn {self.step_id!r} of agent {self.agent!r}: {self.state}>"

    @property
    def is_open(self) -> bool:
        return self.state == OPEN and self.seconds_left > 0

    @property
    def seconds_left(self) -> float:
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    @property
    def session(self) -> str:
        """The session the env sees on this agent's calls: ``<episode id>/<agent>``."""
        return f"{self._desk.id}/{self.agent}"

    async def end(self, response: str | None = None) -> None:
        """End the turn with the agent's reply. A second end, or one after the deadline, does
        nothing: the run already went on without it."""
        if not self.is_open:
            return
        self.response = "" if response is None else str(response)
        self.state = ENDED
        if not self.ended.done():
            self.ended.set_result(None)
        self._desk.turn_changed(self)

    def close(self, state: str) -> None:
        """The run stopped waiting (deadline, abandon); the turn can no longer be ended."""
        if self.state != OPEN:
            return
        self.state = state
        if not self.ended.done():
            self.ended.cancel()
        self._desk.turn_changed(self)

    def check_open(self) -> None:
        if not self.is_open:
            state = TIMED_OUT if self.state == OPEN else self.state
            raise EpisodeError(f"turn '{self.step_id}' of agent '{self.agent}' is over ({state})")

    @contextlib.asynccontextmanager
    async def tools(self) -> AsyncIterator[TurnTools]:
        """The agent's tools for this turn: every env's, plus ``bash`` in its sandbox."""
        self.check_open()
        opened: list[Any] = []
        try:
            sources = await asyncio.gather(*(
                _open_env(env_id, deployment, self.role, opened, self.seconds_left)
                for env_id, deployment in self._setup.envs.items()
            ))
            if self._setup.sandbox is not None:
                sources.append(_sandbox_source(self._setup.sandbox_name or "sandbox",
                                               self._setup.sandbox))
            yield TurnTools(self, _merge(sources))
        finally:
            await asyncio.gather(*(client.close() for client in opened),
                                 return_exceptions=True)


@attrs.frozen
class _Source:
    """Where some tools come from: an env's MCP session, or the agent's sandbox."""

    name: str
    tools: tuple[dict[str, Any], ...]
    client: Any = None
    sandbox: Sandbox | None = None


async def _open_env(env_id: str, deployment: Any, role: str | None, opened: list[Any],
                    timeout: float) -> _Source:
    from agentenv_protocol.client import McpClient

    name = getattr(deployment, "environment_name", None) or env_id.rsplit("/", 1)[-1]
    headers: dict[str, str] = {}
    if getattr(deployment, "headers", None) is not None:
        url = f"{deployment.url}/mcp"
        headers.update(deployment.headers)
    else:
        url = deployment.mcp_url
    if role:
        headers[ROLE_HEADER] = role
    client = McpClient(url, headers=headers, timeout=max(1.0, min(timeout, 60.0)),
                       client_name="agentenv-episode")
    opened.append(client)
    from agentenv_protocol.errors import ProtocolError, TransportError

    try:
        await client.connect()
        return _Source(name, tuple(await client.list_tools_raw()), client=client)
    except (ProtocolError, TransportError) as exc:
        raise EpisodeError(f"env '{name}' did not list its tools: {exc}") from None


def _sandbox_source(name: str, sandbox: Sandbox) -> _Source:
    schema = {"type": "object", "required": ["command"], "properties": {
        "command": {"type": "string", "description": "A bash command."},
        "timeout_seconds": {"type": "number", "description": "Default 120."}}}
    tool = {"name": BASH_TOOL, "inputSchema": schema,
            "description": f"Run a bash command in the agent's sandbox '{name}'; answers its "
                           "output and exit code."}
    return _Source(f"sandbox {name}", (tool,), sandbox=sandbox)


def _merge(sources: list[_Source]) -> dict[str, tuple[_Source, dict[str, Any]]]:
    found: dict[str, tuple[_Source, dict[str, Any]]] = {}
    for source in sources:
        for tool in source.tools:
            name = tool.get("name")
            if not isinstance(name, str):
                raise EpisodeError(f"'{source.name}' lists a tool without a name")
            if name in found:
                raise EpisodeError(f"tool '{name}' is offered by both '{found[name][0].name}' "
                                   f"and '{source.name}'")
            found[name] = (source, tool)
    return found


def result_text(result: Mapping[str, Any]) -> str:
    return "\n".join(str(c.get("text", "")) for c in result.get("content") or []
                     if isinstance(c, dict) and c.get("type") == "text")


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


class TurnTools:
    """The tools of one turn: :meth:`list` (what the model sees), :meth:`call` (what it does)."""

    def __init__(self, turn: Turn, tools: dict[str, tuple[_Source, dict[str, Any]]]) -> None:
        self._turn = turn
        self._tools = tools

    def names(self) -> list[str]:
        # above ``list``: in the class body below it, ``list`` names that method, not the type
        return list(self._tools)

    def list(self) -> list[dict[str, Any]]:
        """The tools as MCP lists them (``name``, ``description``, ``inputSchema``)."""
        return [copy.deepcopy(tool) for _, tool in self._tools.values()]

    async def call(self, name: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool; answers the MCP result (``content``, ``isError``). A failure of the env
        or its gateway is an ``isError`` result too, so a model sees it as a tool failure."""
        turn = self._turn
        turn.check_open()
        if name not in self._tools:
            raise EpisodeError(f"turn '{turn.step_id}' offers no tool '{name}'; it offers "
                               f"{sorted(self._tools)}")
        source, _ = self._tools[name]
        arguments = dict(args or {})
        started = time.perf_counter()
        if source.sandbox is not None:
            result = await self._bash(source.sandbox, arguments)
        else:
            result = await self._mcp(source, name, arguments)
        text = result_text(result)
        turn.trajectory.append({
            "tool": name, "arguments": arguments, "is_error": bool(result.get("isError")),
            "seconds": round(time.perf_counter() - started, 4),
            "text": text[:TRAJECTORY_TEXT_LIMIT],
        })
        return result

    async def _mcp(self, source: _Source, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from agentenv_protocol.errors import ProtocolError, TransportError

        turn = self._turn
        meta = {ROLE_META_KEY: turn.role or "default", SESSION_META_KEY: turn.session}
        try:
            return await source.client.call_tool_raw(
                name, arguments, meta=meta, timeout=max(0.5, turn.seconds_left))
        except ProtocolError as exc:
            return error_result(f"{source.name}: error {exc.code}: {exc.message}")
        except TransportError as exc:
            return error_result(f"{source.name}: {exc}")

    async def _bash(self, sandbox: Sandbox, arguments: dict[str, Any]) -> dict[str, Any]:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return error_result("bash needs 'command', a string")
        timeout = min(float(arguments.get("timeout_seconds") or DEFAULT_BASH_TIMEOUT),
                      max(0.5, self._turn.seconds_left))
        try:
            result = await sandbox.exec(command, timeout=timeout)
        except Exception as exc:  # the sandbox's failure is the tool's failure
            return error_result(f"bash: {type(exc).__name__}: {exc}")
        text = (result.stdout + result.stderr).rstrip() + f"\n(exit {result.exit_code})"
        return {"content": [{"type": "text", "text": text}], "isError": not result.ok}

"""What a verify script may know of the run beyond the env: the graded prompt's conversation.

A script whose ``verify`` takes a ``run`` parameter (``async def verify(mcp_url, run)``, as
scripts written for the reference framework do) gets a :class:`Run`: the turns of the prompt
``env_outcome_verifier`` names with ``prompt_id`` (default: the run's last answered prompt),
each a user message and the agent's reply, and (ours) :meth:`Run.env_url`: the MCP URL of any
env the task deployed, for a script that reads more than one. Trigger firings are never
recorded here, so
``firings()`` is empty, and asking for one env's firings raises :class:`RunRecordUnavailable`
(no firing log was captured), as it does there when a log is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

import attrs


class RunRecordUnavailable(LookupError):
    """A query needs a record that was not captured: ``source`` is ``conversation`` or
    ``env:<id>``."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source, self.reason = source, reason


@attrs.frozen
class Message:
    turn: int
    role: Literal["user", "agent"]
    text: str
    #: not recorded per message here
    sent_at: datetime | None = None
    author: str | None = None
    written_by_triggers: tuple[str, ...] = ()
    user_sim: Mapping[str, Any] | None = None
    parts: tuple[Mapping[str, Any], ...] = ()
    env_clock: Mapping[str, datetime | None] | None = None


@attrs.frozen
class Turn:
    number: int
    #: the user-side message that opened it
    message: Message
    reply: Message | None
    firings: tuple[Any, ...] = ()


@attrs.frozen
class Run:
    """The graded prompt's turns (see the module doc)."""

    _turns: tuple[Turn, ...] = ()
    #: what could not be read, and why (``conversation`` when no prompt was answered)
    unavailable: Mapping[str, str] = attrs.field(factory=dict)
    #: the task's deployed envs: id (and the id's last part) -> an MCP URL needing no headers
    envs: Mapping[str, str] = attrs.field(factory=dict)

    def env_url(self, env_id: str) -> str:
        """The MCP URL of an env this task deployed (its id, or its bundle name)."""
        try:
            return self.envs[env_id]
        except KeyError:
            known = ", ".join(sorted(self.envs)) or "none"
            raise LookupError(f"env {env_id!r} is not deployed in this task (deployed: "
                              f"{known})") from None

    @property
    def turns(self) -> tuple[Turn, ...]:
        if "conversation" in self.unavailable:
            raise RunRecordUnavailable("conversation", self.unavailable["conversation"])
        return self._turns

    def turn(self, number: int) -> Turn:
        if not 1 <= number <= len(self.turns):
            raise LookupError(f"the run has no turn {number}")
        return self._turns[number - 1]

    def firings(self, trigger_id: str | None = None, *, env: str | None = None,
                ) -> tuple[Any, ...]:
        if env is not None:
            raise RunRecordUnavailable(f"env:{env}", "no firing log was captured")
        return ()

    def firing(self, trigger_id: str, *, env: str | None = None) -> Any:
        found = self.firings(trigger_id, env=env)
        return found[0] if found else None


def env_urls(deployed: Mapping[str, Any]) -> dict[str, str]:
    """``{env id: MCP URL}`` of a task's deployments, each also under its id's last part when
    no other env has that name."""
    urls = {env_id: str(env.mcp_url) for env_id, env in deployed.items()
            if getattr(env, "mcp_url", None)}
    short: dict[str, list[str]] = {}
    for env_id in urls:
        short.setdefault(env_id.rsplit("/", 1)[-1], []).append(env_id)
    return {**{name: urls[ids[0]] for name, ids in short.items() if len(ids) == 1}, **urls}


def run_of(reply: Mapping[str, Any] | None, envs: Mapping[str, str] | None = None) -> Run:
    """The :class:`Run` of a ``prompt_agent`` output (None: no prompt was answered)."""
    if reply is None:
        return Run(unavailable={"conversation": "no prompt was answered in this run"},
                   envs=dict(envs or {}))
    agent = str(reply.get("agent_name") or "")
    lines = reply.get("conversation") or [
        {"role": "user", "text": reply.get("prompt") or ""},
        {"role": "agent", "text": reply.get("response") or ""}]
    turns: list[Turn] = []
    for line in lines:
        if line.get("role") == "user":
            number = len(turns) + 1
            turns.append(Turn(number, Message(number, "user", str(line.get("text") or "")),
                              None))
        elif turns and turns[-1].reply is None:
            last = turns[-1]
            turns[-1] = attrs.evolve(last, reply=Message(last.number, "agent",
                                                         str(line.get("text") or ""),
                                                         author=agent or None))
    return Run(tuple(turns), envs=dict(envs or {}))

"""The A2A agent validators: does a deployed agent do what its card says?

Why: an agent author (or a platform admitting agents) wants to know, before an eval spends money
on it, that the agent serves the protocol and each extension it declares. Each step checks one
thing against the agent ``agent_name`` names (deployed by an earlier ``deploy_agent``) and
scores it as rows; ``a2a-agent validate`` runs them all. An extension the card does not declare
is a skipped row (the agent promised nothing), never a failure; one it declares and breaks is a
0 with what went wrong. The reference framework's step names and keys are read
(``a2a_agent_id`` and ``a2a_agent_version`` name the agent under test there; here the deployed
one is checked, and they are kept in the record).

* ``verify_a2a_agent_card``: the card's fields and extensions (``verify_agent_card`` under the
  reference's name).
* ``verify_a2a_core_protocol``: ``message/send`` answered the prompt ``prompt_id`` and
  ``tasks/get`` brought a result without an error.
* ``verify_a2a_trajectory``: an agent declaring trajectory/v1 gave a trajectory for
  ``prompt_id``.
* ``verify_a2a_agent_config_identity``: an agent whose agent-config takes ``name`` and
  ``description`` shows them on its card once set.
* ``verify_a2a_skill_config``: an agent declaring skill-config/v1 takes an inline skill.
* ``verify_a2a_system_prompt``: a ``system_prompt`` set through agent-config reaches the
  model: it holds a fresh token, and the reply to a question only the prompt answers must
  carry it (with the scripted model, a script whose turn matches ``system_contains``).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import (
    AGGREGATORS,
    DEFAULT_AGENT_NAME,
    PreflightView,
    ScoreRow,
    Step,
    StepError,
    find_reply,
)

from .object_forms import card_extension
from .steps import VerifyAgentCard

if TYPE_CHECKING:
    from agent_env.api import TaskContext

#: What ``verify_a2a_system_prompt`` asks; only the system prompt it set says the answer.
SYSTEM_PROMPT_QUESTION = "What is your validator code?"


def _row(index: int, name: str, ok: bool | None, why: str) -> ScoreRow:
    """A row: passed, failed, or (``ok`` None) skipped because the agent promised nothing."""
    return ScoreRow(index, 1.0 if ok else 0.0, bool(ok), why, skipped=ok is None,
                    criterion={"id": name})


@attrs.define(kw_only=True)
class _AgentCheck(Step):
    """What every A2A validator shares: the agent checked, and rows recorded."""

    agent_name: str = DEFAULT_AGENT_NAME
    #: The reference's: the agent under test (here: the one deployed as ``agent_name``).
    a2a_agent_id: str | None = None
    a2a_agent_version: int | None = None
    verifier_id: str | None = None
    score_aggregator: str = "all_pass"

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.score_aggregator not in AGGREGATORS:
            problems.append(f"score_aggregator '{self.score_aggregator}' is not known "
                            f"(known: {', '.join(AGGREGATORS)})")
        return problems

    def agent(self, ctx: TaskContext) -> Any:
        agent = ctx.agent(self.agent_name)
        if not isinstance(getattr(agent, "card", None), dict) or not hasattr(agent, "url"):
            raise StepError(f"agent '{self.agent_name}' is not an A2A agent with a card (an "
                            "outside player?): there is nothing to validate")
        return agent

    def record(self, ctx: TaskContext, rows: list[ScoreRow], **output: Any) -> None:
        """The rows as the step's output, and as a verification unless every one is skipped
        (the agent declares none of it: nothing to score, which is not a 0)."""
        ctx.outputs[self.id] = {"checks": {r.criterion["id"]: (
            "skipped" if r.skipped else "passed" if r.result else "failed") for r in rows},
            **output}
        if all(r.skipped for r in rows):
            ctx.note(f"{self.type}: not scored, {rows[0].justification}")
            return
        ctx.record_verification(self, self.verifier_id, rows, self.score_aggregator)


@attrs.define(kw_only=True)
class VerifyA2aAgentCard(VerifyAgentCard):
    """``verify_agent_card`` under the reference's name, with its keys."""

    type = "verify_a2a_agent_card"

    a2a_agent_id: str | None = None
    a2a_agent_version: int | None = None


@attrs.define(kw_only=True)
class VerifyA2aCoreProtocol(_AgentCheck):
    """``message/send`` answered the prompt ``prompt_id`` and ``tasks/get`` brought its
    result without an error."""

    type = "verify_a2a_core_protocol"

    prompt_id: str

    async def run(self, ctx: TaskContext) -> None:
        self.agent(ctx)
        reply = find_reply(ctx, self.prompt_id)
        sent = reply is not None
        got = sent and not (reply or {}).get("error_type")
        why = (f"{(reply or {}).get('error_type')}: {(reply or {}).get('error_message')}"
               if sent and not got else "")
        self.record(ctx, [
            _row(0, "message/send", sent, "answered the prompt" if sent else
                 f"no reply to prompt '{self.prompt_id}' is recorded"),
            _row(1, "tasks/get", got, "the task ended with a result" if got else
                 (why or "no result to read")),
        ])


@attrs.define(kw_only=True)
class VerifyA2aTrajectory(_AgentCheck):
    """An agent whose card declares trajectory/v1 gave a trajectory for ``prompt_id``."""

    type = "verify_a2a_trajectory"

    prompt_id: str

    async def run(self, ctx: TaskContext) -> None:
        agent = self.agent(ctx)
        declared = card_extension(agent.card, "trajectory") is not None
        reply = find_reply(ctx, self.prompt_id) or {}
        events = int(reply.get("trajectory_events") or 0)
        if not declared:
            row = _row(0, "trajectory", None, "the card declares no trajectory extension")
        elif not reply:
            row = _row(0, "trajectory", False, f"no reply to prompt '{self.prompt_id}' is "
                       "recorded to read a trajectory of")
        else:
            row = _row(0, "trajectory", events > 0, f"{events} trajectory events for prompt "
                       f"'{self.prompt_id}'" if events else "it declares trajectory/v1 but "
                       f"gave no trajectory for prompt '{self.prompt_id}'")
        self.record(ctx, [row], events=events)


@attrs.define(kw_only=True)
class VerifyA2aAgentConfigIdentity(_AgentCheck):
    """An agent whose agent-config takes ``name`` and ``description`` shows them on its
    card once set."""

    type = "verify_a2a_agent_config_identity"

    async def run(self, ctx: TaskContext) -> None:
        import aiohttp

        agent = self.agent(ctx)
        ext = card_extension(agent.card, "agent-config")
        from .a2a_type import _supported_config, post_ok

        supported = _supported_config(agent.card)
        if ext is None or not {"name", "description"} <= supported:
            why = ("the card declares no agent-config extension" if ext is None else
                   "its agent-config takes no name and description (it takes: "
                   f"{', '.join(sorted(supported)) or '-'})")
            self.record(ctx, [_row(0, "identity", None, why)])
            return
        name, description = (f"validator-{secrets.token_hex(6)}",
                             f"validator {secrets.token_hex(6)}")
        async with aiohttp.ClientSession(headers=agent.auth_headers) as http:
            await post_ok(http, f"{agent.url}/ext/agent-config",
                          {"name": name, "description": description}, agent.name)
            async with http.get(f"{agent.url}/.well-known/agent-card.json",
                                timeout=aiohttp.ClientTimeout(total=30)) as resp:
                card = await resp.json(content_type=None) if resp.status == 200 else {}
        shown = isinstance(card, dict) and card.get("name") == name \
            and card.get("description") == description
        self.record(ctx, [_row(0, "identity", shown, "the card shows the name and description "
                               "set" if shown else f"set name {name!r}, the card says "
                               f"{(card or {}).get('name')!r}")])


@attrs.define(kw_only=True)
class VerifyA2aSkillConfig(_AgentCheck):
    """An agent whose card declares skill-config/v1 takes an inline skill."""

    type = "verify_a2a_skill_config"

    async def run(self, ctx: TaskContext) -> None:
        agent = self.agent(ctx)
        if card_extension(agent.card, "skill-config") is None:
            self.record(ctx, [_row(0, "skill-config", None,
                                   "the card declares no skill-config extension")])
            return
        name = f"validator-{secrets.token_hex(4)}"
        try:
            taken = await agent.give_skills([{
                "name": name, "description": "A skill the validator gives.",
                "skill_md": f"---\nname: {name}\ndescription: A skill the validator gives.\n"
                            "---\nSay the word 'validated' when asked.\n"}])
        except StepError as exc:
            self.record(ctx, [_row(0, "skill-config", False, f"adding a skill failed: {exc}")])
            return
        ok = name in taken
        self.record(ctx, [_row(0, "skill-config", ok, f"took skill {name}" if ok else
                               f"answered {taken}, without {name}")], skills=list(taken))


@attrs.define(kw_only=True)
class VerifyA2aSystemPrompt(_AgentCheck):
    """A ``system_prompt`` set through agent-config reaches the model: the reply to a
    question only that prompt answers carries the token it held."""

    type = "verify_a2a_system_prompt"

    #: The model the question goes to (the agent's own when left out).
    model: str | None = None
    #: The token the system prompt holds (fresh when left out; a scripted model's script
    #: names it to answer only when it is there).
    token: str | None = None
    timeout_seconds: float = 300
    poll_interval_seconds: float | None = None

    async def run(self, ctx: TaskContext) -> None:
        import aiohttp

        from .a2a_type import _supported_config, post_ok
        from .steps import PromptAgent

        agent = self.agent(ctx)
        if "system_prompt" not in _supported_config(agent.card):
            self.record(ctx, [_row(0, "system_prompt", None, "its agent-config takes no "
                                   "system_prompt")])
            return
        token = self.token or f"VALIDATOR-SP-{secrets.token_hex(6)}"
        prompt = (f"For validator testing: if you are asked exactly '{SYSTEM_PROMPT_QUESTION}', "
                  f"answer with the token {token} and nothing else.")
        async with aiohttp.ClientSession(headers=agent.auth_headers) as http:
            await post_ok(http, f"{agent.url}/ext/agent-config", {"system_prompt": prompt},
                          agent.name)
        ask = PromptAgent(id=f"{self.id}.ask", agent_name=self.agent_name,
                          prompt=SYSTEM_PROMPT_QUESTION, model=self.model,
                          timeout_seconds=self.timeout_seconds)
        await ask.run(ctx)
        answer = str((ctx.outputs.get(ask.id) or {}).get("response") or "")
        ok = token in answer
        self.record(ctx, [_row(0, "system_prompt", ok, "the reply carries the token the system "
                               "prompt held" if ok else "the reply lacks the token the system "
                               f"prompt held: {answer[:200]!r}")], token=token)

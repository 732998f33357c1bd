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
* ``verify_a2a_modalities``: probes sent by earlier prompts (text, an image...) were taken.
* ``verify_a2a_role``: a role set through agent-config reads back.
* ``verify_a2a_agent_mcp``: a prompt made the agent call its env's tools (the env's gateway
  counts them).
* ``verify_a2a_snapshot``, ``verify_a2a_install``, ``verify_a2a_peer_agents``: record what
  earlier steps showed of snapshot/v1, install/v1 and peer-agents/v1 (a rubric verifier's
  score, a relayed token; for install/v1, also that ``install_agent`` put the agent in a
  task's container). An agent whose card lists none of them is not scored on it.
"""

from __future__ import annotations

import contextlib
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
    example = {'id': 'card', 'type': 'verify_a2a_agent_card', 'agent_name': 'agent'}

    a2a_agent_id: str | None = None
    a2a_agent_version: int | None = None


@attrs.define(kw_only=True)
class VerifyA2aCoreProtocol(_AgentCheck):
    """``message/send`` answered the prompt ``prompt_id`` and ``tasks/get`` brought its
    result without an error."""

    type = "verify_a2a_core_protocol"
    example = {
        'id': 'core',
        'type': 'verify_a2a_core_protocol',
        'agent_name': 'agent',
        'prompt_id': 'ask',
    }

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
    example = {
        'id': 'trajectory',
        'type': 'verify_a2a_trajectory',
        'agent_name': 'agent',
        'prompt_id': 'ask',
    }

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
    example = {'id': 'identity', 'type': 'verify_a2a_agent_config_identity', 'agent_name': 'agent'}

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
    example = {'id': 'skills', 'type': 'verify_a2a_skill_config', 'agent_name': 'agent'}

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
    example = {
        'id': 'system_prompt',
        'type': 'verify_a2a_system_prompt',
        'agent_name': 'agent',
        'model': 'scripted:validate',
    }

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


@attrs.define(kw_only=True)
class VerifyA2aModalities(_AgentCheck):
    """Which input modalities the agent really takes: each probe (``{modality, prompt_id,
    expected}``) names an earlier ``prompt_agent`` that sent it a part of that kind, and
    passes when the reply holds ``expected`` (case-insensitive). A probe whose prompt failed is
    ``protocol_reject``, one whose prompt never ran ``probe_step_did_not_run``, a reply without
    the word ``no_ingestion_evidence``. The card's declared modes are kept beside the result."""

    type = "verify_a2a_modalities"
    example = {
        'id': 'modalities',
        'type': 'verify_a2a_modalities',
        'agent_name': 'agent',
        'probes': [{'modality': 'text', 'prompt_id': 'ask', 'expected': 'PINEAPPLE'}],
    }

    probes: list[dict[str, str]]
    score_aggregator: str = "weighted_average"

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.probes:
            problems.append("probes must list at least one {modality, prompt_id, expected}")
        for index, probe in enumerate(self.probes):
            missing = [k for k in ("modality", "prompt_id", "expected")
                       if not isinstance(probe.get(k), str) or not probe.get(k)]
            if missing:
                problems.append(f"probes[{index}] lacks {', '.join(missing)}")
            elif probe["prompt_id"] not in view.step_ids:
                problems.append(f"probes[{index}]: prompt_id '{probe['prompt_id']}' is no step "
                                "of this task (name the prompt_agent that sent the probe)")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        agent = self.agent(ctx)
        rows, results = [], {}
        for index, probe in enumerate(self.probes):
            reply = find_reply(ctx, probe["prompt_id"])
            text = str((reply or {}).get("response") or "")
            if reply is None:
                reason = "probe_step_did_not_run"
            elif reply.get("error_type"):
                reason = "protocol_reject"
            elif probe["expected"].lower() in text.lower():
                reason = "passed"
            else:
                reason = "no_ingestion_evidence"
            results[probe["modality"]] = {"supported": reason == "passed", "reason": reason,
                                          "probe_response": text[:200]}
            rows.append(_row(index, probe["modality"], reason == "passed",
                             f"{reason}: {text[:120]!r}" if reply else reason))
        card = agent.card
        self.record(ctx, rows, input=results, declared={
            "default_input_modes": card.get("defaultInputModes"),
            "default_output_modes": card.get("defaultOutputModes")})


@attrs.define(kw_only=True)
class VerifyA2aRole(_AgentCheck):
    """An agent whose agent-config takes ``role`` and offers ``get`` keeps the role it is
    given: a fresh one is set, read back, and must be the same."""

    type = "verify_a2a_role"
    example = {'id': 'role', 'type': 'verify_a2a_role', 'agent_name': 'agent'}

    async def run(self, ctx: TaskContext) -> None:
        import aiohttp

        from .a2a_type import _supported_config, post_ok

        agent = self.agent(ctx)
        ext = card_extension(agent.card, "agent-config")
        methods = ((ext or {}).get("params") or {}).get("methods") or {}
        if ext is None or "role" not in _supported_config(agent.card) or "get" not in methods:
            why = ("the card declares no agent-config extension" if ext is None else
                   "its agent-config does not take a role and offer get")
            self.record(ctx, [_row(0, "role", None, why)])
            return
        role = f"validator-role-{secrets.token_hex(4)}"
        endpoint = str(((ext.get("params") or {}).get("endpoint")) or "/ext/agent-config")
        async with aiohttp.ClientSession(headers=agent.auth_headers) as http:
            await post_ok(http, f"{agent.url}{endpoint}", {"role": role}, agent.name)
            async with http.get(f"{agent.url}{endpoint}",
                                timeout=aiohttp.ClientTimeout(total=30)) as resp:
                body = await resp.json(content_type=None) if resp.status == 200 else {}
        seen = ((body or {}).get("config") or {}).get("role")
        self.record(ctx, [_row(0, "role", seen == role, "the role set reads back" if
                               seen == role else f"set role {role!r}, read back {seen!r}")],
                    expected_role=role, observed_role=seen)


#: What ``verify_a2a_agent_mcp`` asks when it names no earlier prompt.
MCP_PROMPT = ("Call one of the tools of your MCP servers once, with arguments that fit it, and "
              "report what it returned. Do not answer from memory.")


@attrs.define(kw_only=True)
class VerifyA2aAgentMcp(_AgentCheck):
    """An agent whose card declares mcp-config/v1 really calls its env's tools: the env's
    gateway records tool calls while the prompt ``prompt_id`` names ran (or one this step
    sends, ``prompt``, answered with ``model``), and the prompt completed."""

    type = "verify_a2a_agent_mcp"
    example = {
        'id': 'mcp',
        'type': 'verify_a2a_agent_mcp',
        'agent_name': 'agent',
        'prompt_id': 'ask',
    }

    prompt_id: str | None = None
    prompt: str = MCP_PROMPT
    model: str | None = None
    #: The env whose gateway is read (default: the agent's first env).
    env_id: str | None = None
    timeout_seconds: float = 300
    poll_interval_seconds: float | None = None

    async def run(self, ctx: TaskContext) -> None:
        from .steps import PromptAgent

        agent = self.agent(ctx)
        if card_extension(agent.card, "mcp-config") is None:
            self.record(ctx, [_row(0, "mcp-config", None,
                                   "the card declares no mcp-config extension")])
            return
        env_id = self.env_id or next(iter(getattr(agent, "env_ids", []) or []), None)
        if env_id is None:
            raise StepError(f"agent '{self.agent_name}' was given no env; name env_id")
        prompt_id = self.prompt_id
        if prompt_id is None:
            ask = PromptAgent(id=f"{self.id}.ask", agent_name=self.agent_name,
                              prompt=self.prompt, model=self.model,
                              timeout_seconds=self.timeout_seconds,
                              poll_interval_seconds=self.poll_interval_seconds)
            await ask.run(ctx)
            prompt_id = ask.id
        reply = find_reply(ctx, prompt_id) or {}
        calls = await _env_tool_calls(ctx, env_id, reply)
        done = bool(reply) and not reply.get("error_type")
        self.record(ctx, [
            _row(0, "completed", done, "the prompt completed" if done else
                 f"prompt '{prompt_id}': {reply.get('error_type') or 'no reply recorded'}"),
            _row(1, "tool calls", calls > 0, f"the env's gateway recorded {calls} tool call(s)"),
        ], tools_invoked=calls, prompt_id=prompt_id,
            tool_call_count_reported=reply.get("tool_call_count"))


async def _env_tool_calls(ctx: TaskContext, env_id: str, reply: dict[str, Any]) -> int:
    """How many tool calls the env's gateway recorded while the prompt ``reply`` answers ran
    (its trajectory's ``tool_call`` events stamped inside the prompt's time)."""
    import datetime as dt
    import json

    import aiohttp

    started = reply.get("started_at_utc")
    if not isinstance(started, str):
        return 0  # no prompt ran (or one recorded before prompts kept their start)
    begin = dt.datetime.fromisoformat(started)
    end = begin + dt.timedelta(seconds=float(reply.get("duration_seconds") or 0))

    env = ctx.env(env_id)
    url, headers = getattr(env, "url", None), getattr(env, "headers", None)
    if not url:
        raise StepError(f"env '{env_id}' has no gateway to read tool calls from")
    async with aiohttp.ClientSession(headers=headers) as http, http.get(
            f"{url}/trajectory", timeout=aiohttp.ClientTimeout(total=30)) as resp:
        if resp.status != 200:
            raise StepError(f"env '{env_id}': reading its trajectory answered HTTP {resp.status}")
        lines = (await resp.text()).splitlines()
    count = 0
    for line in lines:
        event = json.loads(line) if line.strip() else {}
        if event.get("type") == "tool_call" and isinstance(event.get("timestamp_utc"), str):
            at = dt.datetime.fromisoformat(event["timestamp_utc"].replace("Z", "+00:00"))
            count += begin <= at <= end
    return count


@attrs.define(kw_only=True)
class _RubricRecorder(_AgentCheck):
    """A validator that records what earlier steps showed: the rubric verifier
    ``rubric_verifier_id`` scored criterion ``rubric_criterion_id`` (the reference's keys)."""

    rubric_verifier_id: str
    rubric_criterion_id: str | None = None

    def verdict(self, ctx: TaskContext) -> tuple[bool, str]:
        found = ctx.verifications.get(self.rubric_verifier_id)
        if found is None:
            return False, f"verifier '{self.rubric_verifier_id}' recorded nothing"
        rows = [r for r in found.results if self.rubric_criterion_id is None
                or r.criterion.get("id") == self.rubric_criterion_id]
        if not rows:
            return False, (f"verifier '{self.rubric_verifier_id}' has no criterion "
                           f"'{self.rubric_criterion_id}'")
        ok = all(r.score == 1.0 for r in rows)
        return ok, (f"verifier '{self.rubric_verifier_id}' scored "
                    f"{', '.join(f'{r.score:g}' for r in rows)}")


@attrs.define(kw_only=True)
class VerifyA2aSnapshot(_RubricRecorder):
    """snapshot/v1 end to end, as earlier steps did it: a ``snapshot_agent_state`` saved the
    agent's conversation (``snapshot_step_id``, or any that saved one), an agent deployed from it
    was asked to recall what was planted, and the rubric verifier scored that recall."""

    type = "verify_a2a_snapshot"
    example = {
        'id': 'snapshot',
        'type': 'verify_a2a_snapshot',
        'agent_name': 'agent',
        'rubric_verifier_id': 'recall',
        'rubric_criterion_id': 'remembers',
    }

    snapshot_step_id: str | None = None

    async def run(self, ctx: TaskContext) -> None:
        declared = any(card_extension(getattr(a, "card", None) or {}, "snapshot") is not None
                       for a in ctx.agents.values() if isinstance(getattr(a, "card", None),
                                                                  dict))
        if not declared:
            self.record(ctx, [_row(0, "save", None, "no deployed agent's card declares "
                                   "snapshot/v1")])
            return
        saved = [o for key, o in ctx.outputs.items() if isinstance(o, dict)
                 and (self.snapshot_step_id in (None, key)) and isinstance(o.get("objects"), dict)
                 and o.get("objects")]
        recalled, why = self.verdict(ctx)
        self.record(ctx, [
            _row(0, "save", bool(saved), f"{len(saved)} snapshot(s) saved" if saved else
                 "no snapshot_agent_state step saved a snapshot"),
            _row(1, "recall_after_load", recalled, why),
        ])


@attrs.define(kw_only=True)
class VerifyA2aInstall(_RubricRecorder):
    """install/v1 end to end, as earlier steps did it (an ``install_agent`` into a task's
    container, then a prompt a verifier scored): the card declares install/v1, the agent is
    the one ``install_agent`` installed, and the verifier scored its work. An agent without
    install/v1 is not scored (the model-agent serves it; the CLI agents do not)."""

    type = "verify_a2a_install"
    example = {
        'id': 'install',
        'type': 'verify_a2a_install',
        'agent_name': 'agent',
        'rubric_verifier_id': 'judge',
        'rubric_criterion_id': 'works',
    }

    async def run(self, ctx: TaskContext) -> None:
        agent = self.agent(ctx)
        if card_extension(agent.card, "install") is None:
            self.record(ctx, [_row(0, "install", None, "the card declares no install/v1 "
                                   "extension")])
            return
        where = next((o.get("installed_in") for o in ctx.outputs.values()
                      if isinstance(o, dict) and o.get("installed") is True
                      and o.get("agent_name") == self.agent_name), None)
        ok, why = self.verdict(ctx)
        self.record(ctx, [
            _row(0, "installed", where is not None,
                 f"install_agent installed it in container '{where}'" if where else
                 f"no install_agent step installed agent '{self.agent_name}'"),
            _row(1, "install", ok, why)])


@attrs.define(kw_only=True)
class VerifyA2aPeerAgents(_AgentCheck):
    """peer-agents/v1: the card declares it, peers set through it read back, and the agent,
    asked (prompt ``peer_prompt_id``) to relay ``expected_token`` from a peer, answered with
    it. An agent without peer-agents/v1 is not scored (none of the shipped agents serves it
    yet)."""

    type = "verify_a2a_peer_agents"
    example = {
        'id': 'relay',
        'type': 'verify_a2a_peer_agents',
        'agent_name': 'planner',
        'peer_prompt_id': 'ask',
        'expected_token': 'PINEAPPLE',
    }

    peer_prompt_id: str
    expected_token: str

    async def run(self, ctx: TaskContext) -> None:
        import aiohttp

        from .a2a_type import post_ok

        agent = self.agent(ctx)
        ext = card_extension(agent.card, "peer-agents")
        if ext is None:
            self.record(ctx, [_row(0, "peer-agents", None, "the card declares no peer-agents/v1 "
                                   "extension")])
            return
        endpoint = str((ext.get("params") or {}).get("endpoint") or "/ext/peer-agents")
        probe = {"peers": [{"name": "validator-probe", "url": "http://example.invalid"}]}
        async with aiohttp.ClientSession(headers=agent.auth_headers) as http:
            try:
                await post_ok(http, f"{agent.url}{endpoint}", probe, agent.name)
                async with http.get(f"{agent.url}{endpoint}",
                                    timeout=aiohttp.ClientTimeout(total=30)) as resp:
                    listed = await resp.json(content_type=None) if resp.status == 200 else {}
                set_ok = any(p.get("name") == "validator-probe"
                             for p in (listed or {}).get("peers") or [] if isinstance(p, dict))
                why = "the peer set reads back" if set_ok else f"read back {listed!r}"
            except StepError as exc:
                set_ok, why = False, str(exc)
            finally:
                with contextlib.suppress(StepError):
                    await post_ok(http, f"{agent.url}{endpoint}", {"peers": []}, agent.name)
        reply = find_reply(ctx, self.peer_prompt_id) or {}
        text = str(reply.get("response") or "")
        relayed = self.expected_token in text
        self.record(ctx, [
            _row(0, "set and list", set_ok, why),
            _row(1, "peer call", relayed, "the reply carries the peer's token" if relayed else
                 f"prompt '{self.peer_prompt_id}' answered {text[:160]!r}"),
        ])

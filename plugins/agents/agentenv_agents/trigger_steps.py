"""``register_agent_triggers``: script a simulated user's turns (triggers/v1 on the agent).

Why: a conversation eval wants its simulated user to say the same thing at the same point in
every run. The step registers triggers on the agent that plays the user (its card must list
triggers/v1: the SDK serves it, and the model-agent enables it); then, before each user turn of
a ``prompt_agent`` conversation (``max_conversation_turns`` > 1), :func:`decide` asks that agent
what fires, given the turn, the agent's last message and the statuses of the env triggers its
triggers name (read from each env's gateway). What fires speaks for the user (``say``) or ends
the conversation (``end``); when nothing fires, the user's own model answers as before.
The reference's keys: ``agent_name``, ``triggers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from agent_env.api import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.api import TaskContext


def _env_refs(when: Any) -> list[tuple[str, str]]:
    """Every (env_id, trigger_id) an ``env_trigger`` condition names, nested ones too."""
    if not isinstance(when, dict):
        return []
    found = [(str(when.get("env_id")), str(when.get("trigger_id")))] \
        if when.get("type") == "env_trigger" else []
    for child in when.get("of") or []:
        found += _env_refs(child)
    return found


def _deployed_env(ctx: TaskContext, env_id: str) -> str | None:
    """The id ``env_id`` is deployed under in this task (bundle ids are stored qualified)."""
    for key in ctx.envs:
        if key == env_id or key.endswith("/" + env_id):
            return str(key)
    return None


@attrs.define(kw_only=True)
class RegisterAgentTriggers(Step):
    """Register triggers/v1 triggers on the agent ``agent_name`` (the user of a conversation)."""

    type = "register_agent_triggers"

    agent_name: str
    triggers: list[dict[str, Any]]

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if not self.triggers or not all(isinstance(t, dict) for t in self.triggers):
            problems.append("triggers must be a non-empty list of trigger objects")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        import aiohttp

        from .a2a_type import post_ok
        from .object_forms import card_extension

        agent = ctx.agent(self.agent_name)
        card = getattr(agent, "card", None)
        ext = card_extension(card, "triggers/v1") if isinstance(card, dict) else None
        if ext is None:
            raise StepError(f"agent '{self.agent_name}' does not serve triggers/v1 (its card "
                            "does not list it): deploy one that does, such as the model-agent")
        registered: dict[str, set[str]] = {}
        for output in ctx.outputs.values():
            if isinstance(output, dict) and isinstance(output.get("added"), list) \
                    and isinstance(output.get("env_id"), str):
                registered.setdefault(output["env_id"], set()).update(output["added"])
        envs: dict[str, str] = {}
        for trigger in self.triggers:
            for env_id, trigger_id in _env_refs(trigger.get("when")):
                deployed = _deployed_env(ctx, env_id)
                if deployed is None:
                    raise StepError(f"trigger '{trigger.get('id', '?')}' names env '{env_id}', "
                                    "which is not deployed in this task")
                if trigger_id not in registered.get(deployed, set()):
                    raise StepError(f"trigger '{trigger.get('id', '?')}' names env trigger "
                                    f"'{trigger_id}', which no register_env_triggers step "
                                    f"registered on env '{env_id}' (registered there: "
                                    f"{sorted(registered.get(deployed, set()))})")
                envs[env_id] = deployed
        endpoint = (ext.get("params") or {}).get("endpoint") or "/ext/triggers"
        async with aiohttp.ClientSession(headers=agent.auth_headers) as http:
            answer = await post_ok(http, f"{agent.url}{endpoint}", {"triggers": self.triggers},
                                   agent.name)
        ctx.outputs[self.id] = {"agent_name": self.agent_name, "agent_triggers": True,
                                "added": answer.get("added", []), "env_ids": envs}


async def decide(ctx: TaskContext, user_name: str, turn: int, message: str,
                 context_id: str) -> dict[str, Any] | None:
    """What the triggers registered on ``user_name`` say at user turn ``turn`` (the answer of
    ``/ext/triggers/decide``), or None when none are registered there."""
    import aiohttp

    from .a2a_type import post_ok
    from .object_forms import card_extension

    registrations = [o for o in ctx.outputs.values() if isinstance(o, dict)
                     and o.get("agent_triggers") and o.get("agent_name") == user_name]
    if not registrations or user_name not in ctx.agents:
        return None
    agent = ctx.agents[user_name]
    envs: dict[str, str] = {}
    for output in registrations:
        envs.update(output.get("env_ids") or {})
    statuses: dict[str, dict[str, Any]] = {}
    for env_id, deployed in envs.items():
        env = ctx.env(deployed)
        async with aiohttp.ClientSession(headers=env.headers) as http, http.get(
                f"{env.url}/triggers/state", timeout=aiohttp.ClientTimeout(total=30)) as resp:
            if resp.status != 200:  # fail closed: a guess would script the wrong turn
                raise StepError(f"could not read the triggers of env '{env_id}' for the user's "
                                f"turn {turn} (HTTP {resp.status})")
            state = await resp.json(content_type=None)
        statuses[env_id] = {t.get("id"): t.get("status") for t in state.get("triggers") or []}
    ext = card_extension(agent.card, "triggers/v1") or {}
    method = ((ext.get("params") or {}).get("methods") or {}).get("decide") or {}
    endpoint = method.get("endpoint") or "/ext/triggers/decide"
    async with aiohttp.ClientSession(headers=agent.auth_headers) as http:
        return await post_ok(http, f"{agent.url}{endpoint}", {
            "turn": turn, "solver_message": message, "context_id": context_id,
            "env_triggers": statuses}, agent.name)

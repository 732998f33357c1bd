"""What ``EpisodeSpec.from_task`` checks: which agents the trainer plays, and what it can't.

A trainer plays an agent by answering its prompts from outside, through turns. That works for
``deploy_agent`` (stood in for: no container), ``prompt_agent`` (a turn) and verifiers of the
reply. It can't work for a step that needs the agent to exist somewhere (an agent-side
validator, a file loaded into the agent) or for a retry that would replay a turn the player
already took. Everything of that kind is reported in one :class:`EpisodeError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import attrs

from agent_env.agents import DEPLOYS, PROMPTS, READS_REPLY, AgentPrompt, agent_role
from agent_env.episodes.errors import EpisodeError
from agent_env.tasks.plan import descendants, effective_dependencies
from agent_env.tasks.steps import Step


@attrs.frozen
class Prompt:
    """A prompt a trainer's agent will get: one turn of every episode of the spec."""

    agent: str
    step_id: str
    prompt: str
    system_prompt: str | None
    #: The turn's deadline: ``turn_timeout`` when given, else the step's ``timeout_seconds``.
    timeout_seconds: float


@attrs.frozen
class EpisodePlan:
    trainer_agents: tuple[str, ...]
    prompts: tuple[Prompt, ...]


def prompted_agents(steps: Sequence[Step]) -> list[str]:
    """The agents ``prompt_agent`` steps address, in task order."""
    return list(dict.fromkeys(p.agent_name for p in _prompts(steps)))


def _prompts(steps: Sequence[Step]) -> list[AgentPrompt]:
    """The steps that prompt an agent (they have an :class:`AgentPrompt`'s fields)."""
    return [cast(AgentPrompt, s) for s in steps if agent_role(s) == PROMPTS]


def _agent_steps(steps: Sequence[Step], *roles: str) -> list[Any]:
    """The steps playing one of ``roles`` towards an agent (each has ``agent_name``)."""
    return [s for s in steps if agent_role(s) in roles]


def _deployers(steps: Sequence[Step]) -> dict[str, Any]:
    """agent name -> the step that deploys it."""
    return {s.agent_name: s for s in _agent_steps(steps, DEPLOYS)}


def check_arguments(seed: Any, turn_timeout: Any) -> None:
    if seed is not None and not isinstance(seed, Mapping):
        raise EpisodeError("seed must be a mapping {name: value} (each <name> in the task's "
                           f"strings is replaced), not {type(seed).__name__}")
    if turn_timeout is not None and (isinstance(turn_timeout, bool) or
                                     not isinstance(turn_timeout, int | float) or
                                     turn_timeout <= 0):
        raise EpisodeError(f"turn_timeout must be a positive number of seconds, not "
                           f"{turn_timeout!r}")


def plan_episode(
    task_name: str, steps: Sequence[Step], trainer_agents: Iterable[str] | str | None,
    turn_timeout: float | None,
) -> EpisodePlan:
    """The agents to play and their prompts; EpisodeError with every problem found."""
    prompted = prompted_agents(steps)
    if not prompted:
        raise EpisodeError(f"task '{task_name}' prompts no agent")
    if trainer_agents is None:
        if len(prompted) > 1:
            raise EpisodeError(f"task '{task_name}' prompts {prompted}; name the ones to play "
                               "with trainer_agents=")
        chosen = prompted
    else:
        names = [trainer_agents] if isinstance(trainer_agents, str) else list(trainer_agents)
        chosen = list(dict.fromkeys(names))
        if not chosen:
            raise EpisodeError(f"trainer_agents is empty; task '{task_name}' prompts {prompted}")
    problems = list(_problems(steps, chosen, prompted))
    if problems:
        error = EpisodeError(f"task '{task_name}' can't run as an episode: "
                             + "; ".join(problems))
        error.notes = [f"  {p}" for p in problems]
        raise error
    deployed = _deployers(steps)
    prompts = tuple(
        Prompt(s.agent_name, s.id, s.text,
               s.system_prompt if s.system_prompt is not None
               else deployed[s.agent_name].system_prompt,
               float(turn_timeout or s.timeout_seconds))
        for s in _prompts(steps) if s.agent_name in chosen
    )
    return EpisodePlan(tuple(chosen), prompts)


def _problems(steps: Sequence[Step], chosen: Sequence[str],
              prompted: Sequence[str]) -> Iterable[str]:
    for name in chosen:
        if name not in prompted:
            yield f"trainer_agents names '{name}', which the task doesn't prompt (it prompts " \
                  f"{list(prompted)})"
    deployed = set(_deployers(steps))
    for name in chosen:
        if name in prompted and name not in deployed:
            yield f"agent '{name}' is prompted but no deploy_agent step deploys it"
    turns = {s.id: s.agent_name for s in _agent_steps(steps, DEPLOYS, PROMPTS)
             if s.agent_name in chosen}
    deps = effective_dependencies(steps)
    for step in steps:
        config = step.retry_config
        if config is None:
            continue
        origin = config.retry_from_step_id or step.id
        span = {origin, step.id} | descendants(deps, origin)
        replayed = sorted(s for s in span if s in turns)
        if replayed:
            yield (f"step '{step.id}' has a retry_config that would replay step "
                   f"'{replayed[0]}' of agent '{turns[replayed[0]]}' (an outside player's turn "
                   "can't be replayed)")
    for step in steps:
        if agent_role(step) in (DEPLOYS, PROMPTS, READS_REPLY):
            continue
        agent = getattr(step, "agent_name", None)  # not ``name``: the loops above bind a str
        if agent in chosen and not getattr(step, "sandbox_name", None):
            yield (f"step '{step.id}' ({step.type}) works inside agent '{agent}', which an "
                   "outside player plays without a container")

"""A bundle's tasks served to a trainer's framework (OpenEnv, verifiers): which of them an
outside agent can play, and how each one's scores make the reward the trainer gets.

The plugins that adapt episodes to those frameworks share this, so a bundle serves the same
tasks with the same rewards through each of them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_env.episodes.errors import EpisodeError
from agent_env.episodes.spec import EpisodeSpec
from agent_env.episodes.task_source import Task
from agent_env.errors import UserError
from agent_env.tasks.scores import mean_score

Reward = Callable[[Mapping[str, float]], float | None]


@attrs.frozen
class ServedTask:
    """A task served as episodes, and how its scores (``{step id: score}``) make a reward."""

    task: Task
    spec: EpisodeSpec
    reward: Reward
    #: The ids of the steps that record a score (its verifiers), in task order.
    scoring: tuple[str, ...] = ()


@attrs.frozen
class ServedTasks:
    """What a bundle serves: its tasks that can run as episodes, and why the others can't."""

    #: The bundle's folder name.
    name: str
    tasks: tuple[ServedTask, ...]
    #: One line per task left out: ``task 'x' can't run as an episode: ...``.
    refused: tuple[str, ...]
    #: eval name -> its served tasks, in the eval's order.
    evals: Mapping[str, tuple[ServedTask, ...]]

    def by_name(self) -> dict[str, ServedTask]:
        return {served.task.name: served for served in self.tasks}

    async def close(self) -> None:
        """Tear every task's env pool down (reused envs stay up between episodes): all of
        them, then raise the first failure, if any."""
        results = await asyncio.gather(*(served.spec.close() for served in self.tasks),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result


def served_tasks(bundle: str | Path, *, reward: str | Reward | None = None,
                 sandbox: str | None = None, turn_timeout: float | None = None,
                 reuse_envs: bool = True, max_envs: int | None = None) -> ServedTasks:
    """Store every task of ``bundle`` (as ``agent-env run`` does) and prepare an
    :class:`EpisodeSpec` for each that an outside agent can play. Raises :class:`UserError`
    when none can, naming why, or when ``reward`` names a step a served task lacks."""
    found = Task.all_from_bundle(bundle)
    kept: list[ServedTask] = []
    refused: list[str] = []
    for task in found.tasks:
        try:
            spec = EpisodeSpec.from_task(task, turn_timeout=turn_timeout, reuse_envs=reuse_envs,
                                         max_envs=max_envs, sandbox=sandbox)
        except EpisodeError as exc:
            refused.append(str(exc))
            continue
        scoring = scoring_steps(task, spec.registry)
        kept.append(ServedTask(task, spec, reward_function(task, reward, scoring), scoring))
    if not kept:
        why = "; ".join(refused) or "the bundle has no tasks"
        raise UserError(f"{found.name}: no task can be played by an outside agent: {why}")
    named = {served.task.name: served for served in kept}
    evals = {name: tuple(named[n] for n in names if n in named)
             for name, names in found.evals.items()}
    return ServedTasks(found.name, tuple(kept), tuple(refused), evals)


def scoring_steps(task: Task, registry: Mapping[str, type[Any]]) -> tuple[str, ...]:
    """The ids of ``task``'s steps that record a score: those of a type with a
    ``verifier_id`` (every verifier step type has one)."""
    found = []
    for step in task.steps:
        kind = registry.get(str(step.get("type")))
        if kind is not None and attrs.has(kind) and "verifier_id" in attrs.fields_dict(kind):
            found.append(str(step.get("id")))
    return tuple(found)


def reward_function(task: Task, reward: str | Reward | None,
                    scoring: Sequence[str]) -> Reward:
    """``task``'s reward from its scores: ``reward`` itself when a function, that step's score
    when a step id (one not among ``scoring``, the task's scoring steps, is refused now, not
    after its first episode), else the mean of the scores (None when the run recorded none)."""
    if callable(reward):
        return reward
    if reward is None:
        return mean_score
    if reward not in scoring:
        raise UserError(f"reward={reward!r}: task '{task.name}' records no score at a step "
                        f"{reward!r} (it records them at {', '.join(scoring) or 'no step'})")
    return functools.partial(_score_at, reward)


def _score_at(step_id: str, scores: Mapping[str, float]) -> float:
    if step_id not in scores:
        raise LookupError(f"the run recorded no score at step {step_id!r} "
                          f"(it recorded {sorted(scores) or 'none'})")
    return scores[step_id]

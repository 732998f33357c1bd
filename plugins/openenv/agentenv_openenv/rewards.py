"""How a served task's scores (``{step id: score}``) make the reward a trainer gets.

Kept apart from the server so it loads without openenv.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Mapping

from agent_env.api import EpisodeTask, UserError

Reward = Callable[[Mapping[str, float]], float | None]


def reward_function(task: EpisodeTask, reward: str | Reward | None) -> Reward:
    """``task``'s reward from its scores; a step id that no step of the task has is refused now,
    not at the end of the first episode."""
    if callable(reward):
        return reward
    if reward is None:
        return _mean
    ids = [str(step.get("id")) for step in task.steps]
    if reward not in ids:
        raise UserError(f"reward={reward!r}: task '{task.name}' has no step {reward!r} "
                        f"(its steps: {', '.join(ids)})")
    return functools.partial(_score_at, reward)


def _mean(scores: Mapping[str, float]) -> float | None:
    return statistics.fmean(scores.values()) if scores else None


def _score_at(step_id: str, scores: Mapping[str, float]) -> float:
    if step_id not in scores:
        raise LookupError(f"the run recorded no score at step {step_id!r} "
                          f"(it recorded {sorted(scores) or 'none'})")
    return scores[step_id]



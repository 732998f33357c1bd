"""What an episode raises: one error type a training loop can catch, with the run's result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_env.errors import UserError

if TYPE_CHECKING:
    from agent_env.tasks.engine import TaskResult


class EpisodeError(UserError):
    """A task can't run as an episode, a turn was misused, or an episode ended without scores."""


class EpisodeFailed(EpisodeError):
    """The run of an episode failed at a step; :attr:`result` has every failure and score."""

    def __init__(self, message: str, result: TaskResult) -> None:
        super().__init__(message)
        self.result = result

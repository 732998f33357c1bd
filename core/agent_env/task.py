"""Run a task from your own loop: a training loop plays some of its agents, AgentEnv the rest.

::

    from agent_env.task import EpisodeSpec, Task

    spec = EpisodeSpec.from_task(Task.get("my-task"), turn_timeout=900)
    episode = await spec.start()
    while (turn := await episode.next_turn()) is not None:
        async with turn.tools() as tools:      # the agent's env tools, called as its role
            ...                                 # turn.prompt; tools.list(), tools.call()
        await turn.end(response="Done.")
    scores = await episode.result()             # {step_id: score}, as agent-env run reports

``EpisodeSpec.from_task(..., reuse_envs=True)`` resets and reuses envs between episodes (close
the spec, or use ``async with spec:``, to tear the pool down). The machinery is in
:mod:`agent_env.episodes`.
"""

from __future__ import annotations

from agent_env.episodes.episode import Episode
from agent_env.episodes.errors import EpisodeError, EpisodeFailed
from agent_env.episodes.rules import Prompt
from agent_env.episodes.spec import EpisodeSpec
from agent_env.episodes.task_source import Task
from agent_env.episodes.turns import Turn, TurnTools

__all__ = ["Episode", "EpisodeError", "EpisodeFailed", "EpisodeSpec", "Prompt", "Task", "Turn",
           "TurnTools"]

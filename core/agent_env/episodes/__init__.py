"""Episodes: runs of a task in which some agents are played from outside AgentEnv.

The public names are in :mod:`agent_env.task`. The machinery:

* :mod:`.task_source` -- :class:`Task`, a task ready to run (stored, from a bundle, or built);
* :mod:`.rules` -- what ``EpisodeSpec.from_task`` refuses and the prompts a trainer will see;
* :mod:`.turns` -- the outside player that stands in for ``deploy_agent``'s agent, its turns and
  the tools a turn offers (the envs' tools through their gateways, as the agent's role);
* :mod:`.episode` -- one run in the background, handing out turns, tearing down always;
* :mod:`.pool` -- opt-in env reuse: a finished episode's env is reset and handed on;
* :mod:`.spec` -- :class:`EpisodeSpec`, which starts episodes side by side and owns the pool;
* :mod:`.last_resort` -- teardown at interpreter exit of what is still up.
"""

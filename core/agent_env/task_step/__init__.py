"""Source compatibility with the reference framework's task-step SDK.

A step type written for the reference framework subclasses its ``TaskStep`` (``from
agent_env.task_step.task_step import TaskStep``), builds itself with ``from_dict`` and does its
work in ``async execute(context)`` on a ``TaskStepContext``. Its distribution declares it in the
``agent_env.task_steps`` entry-point group. This package gives those names the same shapes here,
and :mod:`.adapter` runs such a class as one of our steps, so the plugin loads and its steps run
unchanged (see ``docs/coming-from-the-reference.md`` for what it sees of a run).

These modules mirror another project's API on purpose (dataclasses where it has them, its
method names), so they do not follow this code base's own conventions.
"""

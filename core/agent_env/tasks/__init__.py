"""Tasks: steps, the DAG engine, the shared context, scores and instance records.

Plugin step types subclass :class:`agent_env.tasks.steps.Step` and use
:class:`agent_env.tasks.context.TaskContext`; both modules import nothing heavy.
"""

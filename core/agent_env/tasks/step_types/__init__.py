"""The core's built-in step types, registered by :mod:`agent_env.tasks.builtin_steps`."""

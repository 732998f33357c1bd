"""``[task_steps] impls = ["module:Class", ...]``: step classes a config names, read as the
reference framework reads them, so a team's own step types run without being packaged.

Each class is one of ours (a :class:`~agent_env.tasks.steps.Step` subclass) or one written for
the reference (a ``TaskStep`` subclass, adapted by :mod:`agent_env.task_step.adapter`); either
way the task files name it by its ``type``. A name that does not import, or a class that is
neither, is a ConfigError naming the class and the section.
"""

from __future__ import annotations

from typing import Any

from agent_env.hookspecs import hookimpl

SECTION = "task_steps"


@hookimpl
def agent_env_step_types() -> list[type]:
    from agent_env.runtime import current

    impls = current().config.section(SECTION).get("impls", [])
    return [step_class(impl) for impl in _listed(impls)]


def _listed(impls: Any) -> list[str]:
    from agent_env.errors import ConfigError

    if not isinstance(impls, list) or not all(isinstance(i, str) for i in impls):
        raise ConfigError(f"[{SECTION}] impls must be a list of 'module:Class' strings, not "
                          f"{impls!r}")
    return impls


def step_class(impl: str) -> type:
    """Our step class for ``impl``; ConfigError naming it and the section otherwise."""
    from agent_env.contributions import import_target
    from agent_env.errors import ConfigError
    from agent_env.task_step.adapter import step_class_for
    from agent_env.task_step.task_step import TaskStep
    from agent_env.tasks.steps import Step

    where = f"[{SECTION}] impls: \"{impl}\""
    if ":" not in impl:
        raise ConfigError(f"{where} is not a 'module:Class' string")
    try:
        found = import_target(impl)
    except Exception as exc:
        raise ConfigError(f"{where} cannot be imported ({exc})") from None
    if isinstance(found, type) and issubclass(found, Step) and found.type:
        return found
    if isinstance(found, type) and issubclass(found, TaskStep) and found.type != TaskStep.type:
        return step_class_for(found)
    raise ConfigError(f"{where} is not a step class with its own type (a subclass of "
                      "agent_env.tasks.steps.Step, or of the reference's "
                      "agent_env.task_step.task_step.TaskStep)")

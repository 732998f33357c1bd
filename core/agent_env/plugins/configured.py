"""Contributions a config names by ``module:Class``, as the reference framework reads them: a
team's own step types and env types, run without being packaged as a plugin.

* ``[task_steps] impls``: step classes, ours (:class:`~agent_env.tasks.steps.Step`) or written
  for the reference (its ``TaskStep``, adapted by :mod:`agent_env.task_step.adapter`); task
  files name each by its ``type``.
* ``[envs] impls``: env type classes (:class:`~agent_env.env_types.EnvType`); an ``env.toml``
  names each by its ``name``. (An env class written for the reference subclasses its
  ``agent_env.env`` modules, which are not here: it does not import, and the error says why.)

A name that does not import, or a class that is none of these, is a ConfigError naming the
class and the section.
"""

from __future__ import annotations

from typing import Any

from agent_env.hookspecs import hookimpl


@hookimpl
def agent_env_step_types() -> list[type]:
    return [step_class(impl) for impl in _impls("task_steps")]


@hookimpl
def agent_env_env_types() -> list[type]:
    return [env_class(impl) for impl in _impls("envs")]


def _impls(section: str) -> list[str]:
    from agent_env.errors import ConfigError
    from agent_env.runtime import current

    impls = current().config.section(section).get("impls", [])
    if not isinstance(impls, list) or not all(isinstance(i, str) for i in impls):
        raise ConfigError(f"[{section}] impls must be a list of 'module:Class' strings, not "
                          f"{impls!r}")
    return impls


def _imported(section: str, impl: str) -> Any:
    from agent_env.contributions import import_target
    from agent_env.errors import ConfigError

    where = f"[{section}] impls: \"{impl}\""
    if ":" not in impl:
        raise ConfigError(f"{where} is not a 'module:Class' string")
    try:
        return import_target(impl)
    except ModuleNotFoundError as exc:
        hint = ""
        if (exc.name or "").startswith("agent_env.") and not impl.startswith(exc.name or "-"):
            hint = ("; it is written against the reference framework's own modules, which "
                    "AgentEnv does not have (see docs: Coming from the reference)")
        raise ConfigError(f"{where} cannot be imported ({exc}){hint}") from None
    except Exception as exc:
        raise ConfigError(f"{where} cannot be imported ({exc})") from None


def step_class(impl: str) -> type:
    """Our step class for ``impl``; ConfigError naming it and the section otherwise."""
    from agent_env.errors import ConfigError
    from agent_env.task_step.adapter import step_class_for
    from agent_env.task_step.task_step import TaskStep
    from agent_env.tasks.steps import Step

    found = _imported("task_steps", impl)
    if isinstance(found, type) and issubclass(found, Step) and found.type:
        return found
    if isinstance(found, type) and issubclass(found, TaskStep) and found.type != TaskStep.type:
        return step_class_for(found)
    raise ConfigError(f"[task_steps] impls: \"{impl}\" is not a step class with its own type "
                      "(a subclass of agent_env.tasks.steps.Step, or of the reference's "
                      "agent_env.task_step.task_step.TaskStep)")


def env_class(impl: str) -> type:
    """The env type class ``impl`` names; ConfigError naming it and the section otherwise."""
    from agent_env.env_types import EnvType
    from agent_env.errors import ConfigError

    found = _imported("envs", impl)
    if isinstance(found, type) and issubclass(found, EnvType) and found.name:
        return found
    raise ConfigError(f"[envs] impls: \"{impl}\" is not an env type (a subclass of "
                      "agent_env.env_types.EnvType with its own name)")

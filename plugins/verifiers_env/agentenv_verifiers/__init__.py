"""A bundle's tasks as a `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_
environment: ``vf.load_environment("agentenv-verifiers", bundle=...)``, or
:func:`load_environment` itself, gives an environment whose dataset rows are the tasks, whose
tools are each episode's env tools and whose rubric is the task's own verifiers.

A library for trainers (prime-rl, verifiers' own ``vf-eval``): it contributes nothing to the
``agent-env`` CLI, and verifiers loads only when :func:`load_environment` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentenv_verifiers.environment import load_environment

__all__ = ["load_environment"]


def __getattr__(name: str) -> Any:
    if name == "load_environment":
        from agentenv_verifiers.environment import load_environment

        return load_environment
    raise AttributeError(f"module 'agentenv_verifiers' has no attribute {name!r}")

"""The builtin plugin that contributes the core's step types through ``agent_env_step_types``."""

from __future__ import annotations

from agent_env.hookspecs import hookimpl


@hookimpl
def agent_env_step_types() -> list[type]:
    from agent_env.tasks.step_types.agent_steps import AGENT_STEP_TYPES
    from agent_env.tasks.step_types.artifact_steps import LoadArtifact
    from agent_env.tasks.step_types.code_steps import RunCode
    from agent_env.tasks.step_types.sandbox_steps import DeploySandbox, TeardownSandboxes
    from agent_env.tasks.step_types.verify_steps import AggregateVerifiers, VerifySandbox

    return [DeploySandbox, LoadArtifact, VerifySandbox, AggregateVerifiers, TeardownSandboxes,
            RunCode, *AGENT_STEP_TYPES]

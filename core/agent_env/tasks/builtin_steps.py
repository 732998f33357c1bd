"""The builtin plugin that contributes the core's step types through ``agent_env_step_types``.

Each is a :class:`~agent_env.contributions.Lazy`: a run imports only the step modules its tasks
use, and ``agent-env plugin list`` imports none.
"""

from __future__ import annotations

from agent_env.contributions import Lazy
from agent_env.hookspecs import hookimpl

_STEPS = "agent_env.tasks.step_types"

#: step type -> "module:class"
CORE_STEP_TYPES = {
    "deploy_sandbox": f"{_STEPS}.sandbox_steps:DeploySandbox",
    "deploy_env": f"{_STEPS}.env_steps:DeployEnv",
    "load_artifact": f"{_STEPS}.artifact_steps:LoadArtifact",
    "verify_sandbox": f"{_STEPS}.verify_steps:VerifySandbox",
    "aggregate_verifiers": f"{_STEPS}.verify_steps:AggregateVerifiers",
    "validation_gate_aggregator": f"{_STEPS}.verify_steps:ValidationGateAggregator",
    "teardown_sandboxes": f"{_STEPS}.sandbox_steps:TeardownSandboxes",
    "run_docker_container": f"{_STEPS}.container_steps:RunDockerContainer",
    "run_code": f"{_STEPS}.code_steps:RunCode",
    "run_container_unit_tests_verifier":
        "agent_env.evals.verifiers:RunContainerUnitTestsVerifier",
    "collect_artifacts": "agent_env.evals.verifiers:CollectArtifacts",
    "rubrics_verifier": "agent_env.evals.rubrics:RubricsVerifier",
    "review": f"{_STEPS}.review_steps:Review",
}


@hookimpl
def agent_env_step_types() -> list[Lazy]:
    return [Lazy(name, target) for name, target in CORE_STEP_TYPES.items()]

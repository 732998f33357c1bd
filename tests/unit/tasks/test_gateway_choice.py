"""``--gateway-env-id`` / ``env deploy --gateway``: checked before anything runs, it must name a
stored env of a gateway type."""

from __future__ import annotations

from typing import Any

from agent_env.bundles.file_entities import put_settings_env
from agent_env.tasks.step_types.env_steps import DeployEnv, gateway_env_problem
from agent_env.tasks.steps import ChoiceProblem, RunChoices


def test_the_gateway_must_be_a_stored_gateway_env(state_root: Any) -> None:
    put_settings_env("t/gw", "gateway_server", {})
    put_settings_env("t/pair", "multi", {"mcp_server_envs": ["a"]})
    assert gateway_env_problem("t/gw") is None
    assert gateway_env_problem("t/nope") == (
        "no env 't/nope' is stored (store one with agent-env env gateway put)")
    assert gateway_env_problem("t/pair") == (
        "env 't/pair' is of type 'multi', not a gateway type (gateway_server)")
    deploy = DeployEnv(id="d", env_id="t/pair")
    assert deploy.needs(RunChoices()) == []
    [problem] = deploy.needs(RunChoices(gateway_env="t/nope"))
    assert isinstance(problem, ChoiceProblem)  # said once for the run, not per step
    assert problem.startswith("--gateway-env-id t/nope: no env 't/nope' is stored")
    assert RunChoices(gateway_env="t/gw").recorded() == {"gateway_env": "t/gw"}

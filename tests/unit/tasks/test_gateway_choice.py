"""``--gateway-env-id`` / ``env deploy --gateway`` and ``--service-db-env-id`` / ``env deploy
--service-db``: checked before anything runs, each must name a stored env of its kind."""

from __future__ import annotations

from typing import Any

from agent_env.bundles.file_entities import put_settings_env
from agent_env.tasks.step_types.env_steps import DeployEnv, stored_env_problem
from agent_env.tasks.steps import ChoiceProblem, RunChoices


def test_the_gateway_must_be_a_stored_gateway_env(state_root: Any) -> None:
    put_settings_env("t/gw", "gateway_server", {})
    put_settings_env("t/pair", "multi", {"mcp_server_envs": ["a"]})
    assert stored_env_problem("t/gw", "gateway") is None
    assert stored_env_problem("t/nope", "gateway") == (
        "no env 't/nope' is stored (store one with agent-env env gateway put)")
    assert stored_env_problem("t/pair", "gateway") == (
        "env 't/pair' is of type 'multi', not a gateway type (gateway_server)")
    deploy = DeployEnv(id="d", env_id="t/pair")
    assert deploy.needs(RunChoices()) == []
    [problem] = deploy.needs(RunChoices(gateway_env="t/nope"))
    assert isinstance(problem, ChoiceProblem)  # said once for the run, not per step
    assert problem.startswith("--gateway-env-id t/nope: no env 't/nope' is stored")
    assert RunChoices(gateway_env="t/gw").recorded() == {"gateway_env": "t/gw"}


def test_the_service_db_must_be_a_stored_store_env(state_root: Any) -> None:
    put_settings_env("t/db", "service_db", {})
    put_settings_env("t/gw", "gateway_server", {})
    assert stored_env_problem("t/db", "store") is None
    assert stored_env_problem("t/gw", "store") == (
        "env 't/gw' is of type 'gateway_server', not an env state store type (service_db)")
    deploy = DeployEnv(id="d", env_id="t/any")
    problems = deploy.needs(RunChoices(gateway_env="t/db", service_db_env="t/none"))
    assert problems == [
        "--gateway-env-id t/db: env 't/db' is of type 'service_db', not a gateway type "
        "(gateway_server)",
        "--service-db-env-id t/none: no env 't/none' is stored (store one with agent-env env "
        "service-db put)"]
    assert RunChoices(service_db_env="t/db").recorded() == {"service_db_env": "t/db"}

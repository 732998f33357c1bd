"""Preflight finds every problem of a task at once."""

from agent_env.runtime import current
from agent_env.tasks.plan import check_steps


def registry():
    return current().host.registry("step_type")


def test_every_problem_is_reported_together():
    raw = [
        {"id": "a", "type": "bogus"},
        {"id": "a", "type": "deploy_sandbox"},
        {"id": "b", "type": "deploy_sandbox", "depends_on": ["z"]},
        {"id": "c", "type": "deploy_sandbox", "depends_on": "b", "colour": 1},
        {"id": "d", "type": "deploy_sandbox", "depends_on": ["e"]},
        {"id": "e", "type": "load_artifact", "artifact_id": "missing"},
    ]
    _, problems = check_steps(raw, registry())
    text = "\n".join(problems)
    assert "step 'a': 'bogus' is not a known step type" in text
    assert "step 2: id 'a' is already used by step 1" in text
    assert "step 'b': depends_on 'z' names no step in this task" in text
    assert "step 'c': depends_on must be a list of step ids" in text
    assert "step 'c': key 'colour' is not known to 'verify_sandbox'" not in text
    assert "key 'colour' is not known to 'deploy_sandbox'" in text
    assert "step 'd': depends_on 'e' names a later step" in text
    assert "step 'e': artifact_id 'missing' names no artifact" in text


def test_wrong_field_types_and_retry_targets():
    raw = [
        {"id": "a", "type": "deploy_sandbox", "port": "80"},
        {"id": "b", "type": "deploy_sandbox", "sandbox_name": "x",
         "retry_config": {"retry_from_step_id": "zz"}},
    ]
    _, problems = check_steps(raw, registry())
    assert any("step 'a'" in p and "port" in p for p in problems)
    assert any("retry_from_step_id 'zz'" in p for p in problems)


def test_hello_steps_are_clean():
    import json
    from pathlib import Path

    import agent_env.bundles.shipped as shipped

    raw = json.loads((Path(shipped.__file__).parent / "hello/tasks/hello.json").read_text())
    steps, problems = check_steps(raw, registry(), {"artifacts": frozenset({"greeting"})})
    assert problems == []
    assert [s.type for s in steps] == ["deploy_sandbox", "load_artifact", "verify_sandbox"]


def test_deploy_env_reads_other_tools_keys_and_refuses_what_it_cannot_honour():
    """Task files exported elsewhere carry every key at its default: those pass. A value no
    provider or env type here can honour is a problem that says why, never silently dropped."""
    envs = {"envs": frozenset({"echo"})}
    exported = {"id": "d", "type": "deploy_env", "env_id": "echo", "disk_size_gb": 10,
                "gateway_mode": "performance", "env_state_type": None,
                "env_state_instance_id": None, "artifact_id": None, "metadata": {}}
    from agent_env.tasks.plan import normalise_step

    _, problems = check_steps([normalise_step(exported)], registry(), envs)
    assert problems == []
    _, problems = check_steps([{"id": "d", "type": "deploy_env", "env_id": "echo",
                                "gateway_mode": "consistent", "metadata": {"a": 1}}],
                              registry(), envs)
    assert problems == []
    raw = [{"id": "d", "type": "deploy_env", "env_id": "echo", "gateway_mode": "fast",
            "disk_size_gb": 50, "env_state_type": "postgres", "artifact_id": "data"}]
    _, problems = check_steps(raw, registry(), envs)
    text = "\n".join(problems)
    assert "gateway_mode must be one of performance, consistent, not 'fast'" in text
    assert "disk_size_gb 50: no sandbox provider here sizes an env's disk" in text
    assert ("env_state_type 'postgres': no installed env type backs such an env state "
            "(installed: local_postgres)") in text
    assert "artifact_id: no env type here takes an artifact at deploy" in text


def test_load_artifact_reads_exported_shapes():
    """``artifacts`` as ``{"id", "version"}`` objects and ``collected_artifacts_step_id``
    become ours before preflight; what no provider here can do is a problem saying why."""
    from agent_env.tasks.step_types.artifact_steps import LoadArtifact

    raw = LoadArtifact.adapt({"id": "l", "type": "load_artifact", "sandbox_name": "b",
                              "artifacts": [{"id": "a", "version": 2},
                                            {"id": "b", "version": None}],
                              "collected_artifacts_step_id": "c"})
    assert raw["artifacts"] == ["a", "b"] and raw["artifact_versions"] == {"a": 2}
    assert raw["artifact_from_step_id"] == "c" and "collected_artifacts_step_id" not in raw
    _, problems = check_steps([raw], registry(), {"artifacts": frozenset({"a", "b"})})
    assert "step 'l': artifact_from_step_id loads what that step collected: give it alone" \
        in "\n".join(problems)
    raw = [{"id": "d", "type": "deploy_sandbox", "sandbox_name": "b"},
           {"id": "l", "type": "load_artifact", "sandbox_name": "b", "artifacts": ["a"],
            "depends_on": ["d"], "container_name": "app", "snapshot_after_load": True,
            "env_step_id": "d"}]
    _, problems = check_steps(raw, registry(), {"artifacts": frozenset({"a"})})
    text = "\n".join(problems)
    assert "container_name" not in text  # a container a run_docker_container step starts
    assert "snapshot_after_load: snapshotting an env after a load is not supported" in text
    assert "env_step_id picks a deployment of env_id: give env_id too" in text


def test_the_runs_model_choices_are_checked_and_recorded(monkeypatch):
    """``--user-model`` and ``--judge-model`` are typed run choices: kept in the record, and a
    model nobody would answer is a problem before the run."""
    from agent_env.runtime import reset
    from agent_env.tasks.plan import run_needs
    from agent_env.tasks.steps import RunChoices

    monkeypatch.delenv("AGENT_ENV_MODEL_BASE_URL", raising=False)
    reset()
    choices = RunChoices(user_model="gpt-x", judge_model="scripted:judge")
    assert choices.recorded() == {"user_model": "gpt-x", "judge_model": "scripted:judge"}
    problems = run_needs([], choices)
    assert problems[0].startswith("--user-model: model 'gpt-x' goes to the model upstream, "
                                  "and no upstream is configured")
    assert len(problems) == 1  # scripted: is a provider the agents plugin serves


def test_a_string_where_a_list_is_wanted_is_refused_not_split_into_letters():
    raw = [{"id": "load", "type": "load_artifact", "artifacts": "notes"},
           {"id": "ok", "type": "load_artifact", "artifacts": ["notes"]}]
    _, problems = check_steps(raw, registry(), {"artifacts": frozenset({"notes"})})
    [problem] = problems
    assert problem.startswith("step 'load': artifacts: invalid value for type, expected list")

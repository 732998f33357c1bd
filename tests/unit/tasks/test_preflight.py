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

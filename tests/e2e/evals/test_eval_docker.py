"""An eval on Docker sandboxes: unit-test verifier with a reward file, collected artifacts, and a
forced infrastructure error (an image the engine lacks) retried, then reported apart."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.docker


def steps(image: str) -> list[dict[str, Any]]:
    return [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box",
         "sandbox_mode": "container", "sandbox_type": "docker", "image": image},
        {"id": "tests", "type": "run_container_unit_tests_verifier", "sandbox_name": "box",
         "base_dir": "/tmp", "reward_file": "out/reward.txt",
         "test_command": "mkdir -p out && python -c 'print(0.75)' > out/reward.txt "
                         "&& echo ran > out/log.txt"},
        {"id": "collect", "type": "collect_artifacts", "sandbox_name": "box", "base_dir": "/tmp",
         "paths": ["out"]},
    ]


def test_docker_eval_scores_collects_and_counts_infra_errors_apart(agent_env,
                                                                    docker_client) -> None:
    for task_id, image in (("tests-pass", "python:3.11-slim"),
                           ("no-image", "agentenv-no-such-image:never")):
        (agent_env.root / f"{task_id}.json").write_text(json.dumps(steps(image)))
        assert agent_env("task", "create", f"{task_id}.json", "--id", task_id).returncode == 0
    (agent_env.root / "e.json").write_text(json.dumps(["tests-pass", "no-image"]))
    assert agent_env("eval", "create", "e.json", "--id", "docker-eval").returncode == 0
    result = agent_env("eval", "run", "--id", "docker-eval", "--k", "2", "--json", timeout=180)
    assert result.returncode == 1, result.stderr  # a run ended in an infrastructure error
    document = json.loads(result.stdout)
    tasks = {t["task_id"]: t for t in document["tasks"]}
    assert (tasks["tests-pass"]["mean_score"], tasks["tests-pass"]["errors"]) == (0.75, 0)
    assert tasks["no-image"]["errors"] == 2 and tasks["no-image"]["pass@2"] is None
    assert "retrying (attempt 2)" in result.stderr
    errors = [r for r in document["runs"] if r["task_id"] == "no-image"]
    assert all(r["outcome"] == "error" and r["attempts"] == 2 for r in errors)
    assert all(r["error_kind"] == "infra" for r in errors)
    ran = next(r for r in document["runs"] if r["task_id"] == "tests-pass")
    record = json.loads(agent_env("task", "get-instance", ran["instance_id"]).stdout)
    files = record["context"]["outputs"]["collect"]["files"]
    assert sorted(files) == ["/tmp/out/log.txt", "/tmp/out/reward.txt"]
    assert files["/tmp/out/reward.txt"]["size"] == len("0.75\n")
    for run in document["runs"]:  # every container the eval started is gone
        label = {"label": f"agentenv.run={run['instance_id']}"}
        assert docker_client.containers.list(all=True, filters=label) == []

"""A website env as a reference user handles one: ``env website put`` from two build contexts,
``env deploy`` (its addresses printed), ``artifact environment put`` and ``env website
load-environment-artifact`` with the token: the file lands in the backend container at
``/tmp/data``, the backend answers with the seeded list, the page comes through the gateway and
the request is in the trajectory; then ``env teardown`` leaves nothing."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

TODO = (Path(__file__).resolve().parents[3]
        / "plugins/agents/agentenv_agents/bundles/website-todo/envs/todo")


def fetch(url: str, token: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read()


def test_a_stored_website_deploys_is_seeded_and_serves_its_page(
        agent_env: Any, docker_client: Any, tmp_path: Path) -> None:
    put = agent_env("env", "website", "put", "--id", "w/todo", "--backend-docker-context",
                    str(TODO / "backend"), "--frontend-dockerfile",
                    str(TODO / "frontend/Dockerfile"), "--environment-name", "todo")
    assert put.returncode == 0, put.stderr
    (tmp_path / "list.json").write_text('{"todos": [{"text": "pay rent"}]}')
    assert agent_env("artifact", "environment", "put", str(tmp_path / "list.json"), "--id",
                     "rent", "--description", "a list", "--environment-name",
                     "todo").returncode == 0
    deployed = agent_env("env", "deploy", "--id", "w/todo", "--ttl-seconds", "900",
                         timeout=600)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    fields = dict(re.findall(r"^(Instance ID|Env Gateway Url|Token): (\S+)", deployed.stdout,
                             re.M))
    instance, gateway, token = fields["Instance ID"], fields["Env Gateway Url"], fields["Token"]
    try:
        loaded = agent_env("env", "website", "load-environment-artifact", "--instance-id",
                           instance, "--environment-artifact-id", "rent", "--token", token,
                           timeout=120)
        assert loaded.returncode == 0, loaded.stdout + loaded.stderr
        assert loaded.stdout.endswith(f"Loaded rent v1 into {instance}: todo\n")
        labelled = {"label": f"agentenv.deployment={instance}"}
        backend = next(c for c in docker_client.containers.list(filters=labelled)
                       if c.name.endswith("todo-website-backend"))
        assert backend.exec_run("cat /tmp/data/list.json").output == \
            b'{"todos": [{"text": "pay rent"}]}'
        _, got = fetch(f"{gateway}/svc/todo/agentenv", token,
                       {"jsonrpc": "2.0", "id": 1, "method": "data/get"})
        assert json.loads(got)["result"]["parts"][0]["data"]["todos"][0]["text"] == "pay rent"
        status, page = fetch(f"{gateway}/website/todo/", token)
        assert status == 200 and b"<title>Todo</title>" in page
        _, lines = fetch(f"{gateway}/trajectory", token)
        events = [json.loads(line) for line in lines.splitlines()]
        assert [(e["route"], e["method"], e["path"], e["status"]) for e in events
                if e["type"] == "http_request"][-1] == ("website", "GET", "/", 200)
    finally:
        down = agent_env("env", "teardown", "--id", instance, timeout=120)
        assert down.returncode == 0, down.stderr
    assert docker_client.containers.list(all=True, filters=labelled) == []

"""``agent-env a2a-agent deploy``: an agent on its own, outliving the command: its A2A URL and
token are printed and work (nothing works without the token), the model behind it is the
configured upstream (a TEST DOUBLE here), ``list-instances``/``get-instance`` show it, ``gc``
keeps it while live, and ``teardown`` removes every container it had."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fake_models import KEY, PLAIN, ToolCallingFake

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def rpc(url: str, token: str | None, method: str, params: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}/a2a", body, headers),
                                    timeout=30) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), None


def test_a_deployed_agent_answers_with_its_token_until_torn_down(
        tmp_path: Path, upstream: tuple[ToolCallingFake, str], docker_client: Any) -> None:
    fake, base_url = upstream
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env.update(AGENT_ENV_STATE_DIR=str(tmp_path / "state"), E2E_UPSTREAM_KEY=KEY)
    config = tmp_path / "config.toml"
    config.write_text(f'[model]\nbase_url = "{base_url}"\napi_key = "env:E2E_UPSTREAM_KEY"\n')

    def agent_env(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENT_ENV), "--config", str(config), *args],
                              capture_output=True, text=True, env=env, timeout=300,
                              check=False)

    deployed = agent_env("a2a-agent", "deploy", "--id", "model-agent", "--model", "fake-m",
                         "--ttl-seconds", "900", "--json")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    info = json.loads(deployed.stdout)
    instance, url, token = info["instance_id"], info["urls"]["a2a"], info["token"]
    label = {"label": f"agentenv.deployment={instance}"}
    try:
        assert info["kind"] == "agent" and info["model"] == "fake-m"
        # the command has exited; the agent is still up, and wants its token
        assert rpc(url, None, "tasks/get", {"id": "x"})[0] == 401
        assert rpc(url, token + "x", "tasks/get", {"id": "x"})[0] == 401
        status, sent = rpc(url, token, "message/send", {
            "message": {"messageId": "m1", "role": "user",
                        "parts": [{"kind": "text", "text": "say hi"}]},
            "configuration": {"blocking": False}})
        assert status == 200, sent
        task = sent["result"]
        deadline = time.monotonic() + 60
        while task["status"]["state"] not in ("completed", "failed"):
            assert time.monotonic() < deadline, task
            time.sleep(0.2)
            task = rpc(url, token, "tasks/get", {"id": task["id"]})[1]["result"]
        texts = [p["text"] for p in task["status"]["message"]["parts"] if p["kind"] == "text"]
        assert texts == [f"{PLAIN}: say hi"], task
        assert [r["model"] for r in fake.requests] == ["fake-m"]

        # a2a-agent add-skill: the token deploy printed, through skill-config/v1
        skill = tmp_path / "tidy" / "SKILL.md"
        skill.parent.mkdir()
        skill.write_text("---\nname: tidy\ndescription: Keep files tidy.\n---\nBe tidy.\n")
        added = agent_env("a2a-agent", "add-skill", "--instance-id", instance,
                          "--skill-md-path", str(skill), "--token", token)
        assert added.returncode == 0 and added.stdout == f"Added skill tidy to {instance}\n", \
            added.stdout + added.stderr
        wrong = agent_env("a2a-agent", "add-skill", "--instance-id", instance,
                          "--skill-md-path", str(skill), "--token", token + "x")
        assert wrong.stderr == (f"Error: deployment {instance}: the token is not this "
                                "agent's\n"), wrong.stderr
        none = agent_env("a2a-agent", "add-skill", "--instance-id", instance,
                         "--skill-md-path", str(skill))
        assert "the agent's token is needed" in none.stderr

        listed = agent_env("a2a-agent", "list-instances")
        assert instance in listed.stdout and "live" in listed.stdout, listed.stdout
        shown = json.loads(agent_env("a2a-agent", "get-instance", "--id", instance).stdout)
        assert shown["urls"]["a2a"] == url and "token" not in shown
        kept = agent_env("gc", "--dry-run", "--label", f"agentenv.deployment={instance}")
        assert f"deployed agent {instance}, until" in kept.stdout, kept.stdout + kept.stderr
        assert docker_client.containers.list(filters=label)  # gc left it alone

        down = agent_env("a2a-agent", "teardown", "--id", instance)
        assert down.returncode == 0 and f"Tore down {instance}." in down.stdout, down.stderr
        assert docker_client.containers.list(all=True, filters=label) == []
        again = agent_env("a2a-agent", "teardown", "--id", instance)
        assert again.returncode == 0 and "nothing to do" in again.stdout
    finally:
        for container in docker_client.containers.list(all=True, filters=label):
            container.remove(force=True)
        for network in docker_client.networks.list(filters=label):
            network.remove()


def test_bad_deploy_input_is_one_line_and_deploys_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env["AGENT_ENV_STATE_DIR"] = str(tmp_path / "state")
    for args, error in [
        (["--id", "nosuch"], "Error: no agent named 'nosuch'"),
        (["--id", "model-agent", "--env-var", "NOVALUE"],
         "Error: --env-var takes NAME=VALUE, not 'NOVALUE'"),
        (["--id", "model-agent", "--ttl-seconds", "0"],
         "Error: Invalid value for '--ttl-seconds': '0' is not a time to live"),
        (["--id", "model-agent", "--ttl-seconds", "1e30"],  # issue 31, class 16
         "Error: Invalid value for '--ttl-seconds': '1e30' is not a time to live"),
        (["--id", "model-agent", "--model", "gpt-4o"],
         "Error: --model: model 'gpt-4o' goes to the model upstream, and no upstream is "
         "configured"),
    ]:
        done = subprocess.run([str(AGENT_ENV), "a2a-agent", "deploy", *args],
                              capture_output=True, text=True, env=env, timeout=60, check=False)
        # a bad option value is click's usage error (exit 2), the rest ours (exit 1)
        assert done.returncode in (1, 2) and done.stderr.splitlines()[-1].startswith(error), \
            done.stderr
        assert done.stdout == ""

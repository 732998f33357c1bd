"""A ``cli`` artifact installed into a real agent's container: ``load_artifact`` with
``agent_name`` and ``env_id`` puts the command at ``/opt/cli/<name>/``, executable, with the
env's gateway beside it in ``.env``; run inside the sealed agent's container it reaches the env
through that URL; ``add_skills`` then gives it a skill pointing at that CLI and an inline one;
``build_mcp_cli`` stores a CLI over the env's tools, which ``load_artifact`` installs from it.
The model is the scripted one (a test double); the agent is model-agent."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from run_children import Run, owned_by

pytestmark = pytest.mark.docker

HELLO = '''#!/usr/bin/env python3
"""Reads the gateway URL beside it and prints the env's card name."""
import json
import pathlib
import urllib.request

here = pathlib.Path(__file__).resolve().parent
url = dict(line.split("=", 1) for line in (here / ".env").read_text().split())[
    "AGENT_ENV_GATEWAY_URL"]
with urllib.request.urlopen(url + "/.well-known/agent-env.json", timeout=10) as reply:
    print("card:", json.load(reply)["name"])
'''


def test_a_cli_lands_in_the_agent_and_reaches_the_env(tmp_path: Path,
                                                      docker_client: Any) -> None:
    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "cli-smoke"
    shutil.copytree(BUNDLES / "agents-smoke", bundle)
    tool = bundle / "artifacts" / "hello_cli"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "hello").write_text(HELLO)
    (tool / "artifact.toml").write_text(
        'type = "cli"\ncommand_name = "hello"\nentrypoint = "bin/hello"\n')
    task = bundle / "tasks" / "smoke.json"
    steps = json.loads(task.read_text())
    steps.insert(3, {"id": "install", "type": "load_artifact", "depends_on": ["agent"],
                     "agent_name": "agent", "env_id": "echo", "artifact_id": "hello_cli"})
    steps.insert(4, {"id": "skills", "type": "add_skills", "depends_on": ["install"],
                     "agent_name": "agent", "cli_artifact_ids": ["hello_cli"],
                     "skills": [{"name": "greet", "description": "Greets people.",
                                 "body": "Say hello first."}]})
    steps[5]["depends_on"] = ["skills", "model"]
    # build_mcp_cli: a CLI over the echo env's tools, installed from the step that stored it
    steps.insert(5, {"id": "tools_cli", "type": "build_mcp_cli", "depends_on": ["deploy"],
                     "env_id": "echo", "command_name": "echoes"})
    steps.insert(6, {"id": "install_tools_cli", "type": "load_artifact",
                     "depends_on": ["tools_cli", "agent"], "agent_name": "agent",
                     "env_id": "echo", "artifact_from_step_id": "tools_cli"})
    task.write_text(json.dumps(steps))
    run = Run(tmp_path, str(bundle), "cli", "--keep")
    try:
        seen = "".join(run.wait_for_line(r"^Holding \d+ sandbox"))
        assert "tasks/smoke.json v1: passed" in seen, seen
        (agent,) = [c for c in owned_by(docker_client, run.pid)["containers"]
                    if c["Labels"].get("agentenv.role") == "agent"
                    or c["Labels"].get("agentenv.container") == "agent"]
        container = docker_client.containers.get(agent["Id"])
        mode = container.exec_run("stat -c %a /opt/cli/hello/bin/hello").output.strip()
        assert mode == b"755"
        ran = container.exec_run("/opt/cli/hello/bin/hello")
        assert ran.exit_code == 0 and ran.output.strip() == b"card: echo", ran.output
        # the generated CLI: the tools listed, one called, bad input said in one line
        echoes = "/opt/cli/echoes/bin/echoes"
        listed = container.exec_run([echoes, "list"])
        assert listed.exit_code == 0 and listed.output.decode().startswith("echo\t"), listed
        called = container.exec_run([echoes, "echo", "--text", "through the cli"])
        assert (called.exit_code, called.output.strip()) == (0, b"through the cli"), called
        helped = container.exec_run([echoes, "echo", "--help"]).output.decode()
        assert "--text (string, required)" in helped, helped
        missing = container.exec_run([echoes, "echo"], demux=True)
        assert missing.exit_code == 1
        assert missing.output[1].strip() == b"echoes echo: missing --text", missing.output
        unknown = container.exec_run([echoes, "nope"], demux=True)
        assert unknown.exit_code == 2 and b"no tool 'nope'" in unknown.output[1]
        # add_skills: the agent took the inline skill and the one pointing at the CLI
        shown = subprocess.run(
            [sys.executable, "-m", "agent_env", "task", "get-instance",
             re.search(r"instance (\S+)", seen).group(1)],  # type: ignore[union-attr]
            env={**os.environ, "AGENT_ENV_STATE_DIR": str(run.state)}, capture_output=True,
            text=True, timeout=60, check=True)
        outputs = json.loads(shown.stdout)["context"]["outputs"]
        assert outputs["skills"]["skills"] == ["greet", "hello-cli"], outputs["skills"]
        assert outputs["tools_cli"]["tools"] == ["echo"]
        assert outputs["tools_cli"]["artifact_version"] == 1
        assert outputs["install_tools_cli"]["installed_clis"]["echo-cli"] == {
            "command_name": "echoes", "install_path": "/opt/cli/echoes/bin/echoes"}
        run.process.send_signal(signal.SIGINT)
        code, out, err = run.finish(timeout=120)
        assert code == 130, out + err
        assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.communicate()

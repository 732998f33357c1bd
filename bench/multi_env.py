"""A ``multi`` env of an app and its PostgreSQL (db-orders' ``shop``) deployed and called once,
against the same containers started by hand, measured side by side.

The run is ``agent-env run`` of a bundle holding db-orders' envs and one task: ``deploy_env
shop`` (the database service, PostgreSQL with its MCP server in one container; the app; the
gateway) and an ``env_outcome_verifier`` making one tool call (``list_orders``) through the
gateway; then teardown. Warm: images built and the ledger written by a first run.

The floor is that layout by hand with the docker CLI: the private and edge networks side by
side, the three containers side by side (the children under the names the app reaches them by,
the gateway on both networks publishing its port), the gateway's ``/ready``, the same tool call,
everything removed. The bar (issue 33): the warm run at most 1.5x the floor. Floor and warm
samples alternate so drift hits both alike.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from bench.bars import Bar
from bench.echo_mcp import _agent_env, _side_by_side, gateway_image, tool_text, wait_ready
from bench.measure import Series, bytecode_cached, time_command

FLOOR = "multi env floor: 2 networks + db, app and gateway containers + 1 call, by hand"
WARM = "agent-env run of db-orders' shop env + 1 call (warm)"
BARS = (Bar(WARM, at_most=1.5),)
TASK = [
    {"id": "deploy", "type": "deploy_env", "env_id": "shop", "sandbox_type": "docker"},
    {"id": "call", "type": "env_outcome_verifier", "depends_on": ["deploy"], "env_id": "shop",
     "file_artifact_id": "one_call", "verifier_id": "call"},
]
VERIFY = '''from agentenv_protocol.client import McpClient


async def verify(mcp_url):
    async with McpClient(mcp_url) as client:
        result = await client.call_tool("list_orders")
    return [{"id": "listed", "result": "1002" in result.text, "description": result.text}]
'''


def bundle(workdir: Path) -> Path:
    """db-orders' envs with one task that deploys ``shop`` and makes one call."""
    from agentenv_agents.plugin import BUNDLES

    folder = workdir / "multi-env-bench"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(BUNDLES / "db-orders" / "envs", folder / "envs")
    (folder / "tasks").mkdir()
    (folder / "tasks" / "deploy.json").write_text(json.dumps(TASK))
    (folder / "artifacts" / "one_call").mkdir(parents=True)
    (folder / "artifacts" / "one_call" / "verify.py").write_text(VERIFY)
    return folder


def image_of(output: str, env: str) -> str:
    found = re.search(r"^(?:\[[^\]\n]*\]\s+)?envs/" + re.escape(env) +
                      r": image (\S+)(?: \(cached\)| built in .*)$", output, re.MULTILINE)
    if not found:
        raise RuntimeError(f"no image line for envs/{env} in the run's output:\n"
                           f"{output[-2000:]}")
    return found.group(1)


def call_list_orders(base: str) -> None:
    """The gateway's ``/ready`` (60 s at most: the database starts first), then one call."""
    wait_ready(base, 60)
    assert "1002" in tool_text(base, "list_orders", {})


def floor_once(db_image: str, app_image: str, gateway: str) -> float:
    """The layout by hand (see the module's docstring); seconds."""
    from agentenv_mcp_env.gateway_image import GATEWAY_PORT, gateway_command

    start = time.perf_counter()
    name = f"floor-{secrets.token_hex(4)}"
    token = secrets.token_urlsafe(16)
    db, app, gw = f"{name}-db", f"{name}-app", f"{name}-gateway"
    _side_by_side(
        ["docker", "network", "create", "--internal", "-o",
         "com.docker.network.bridge.inhibit_ipv4=true", name],
        ["docker", "network", "create", f"{name}-edge"])
    try:
        children = ["http://env-orders-db:18765", "http://env-orders:18765"]
        command = " ".join(gateway_command(children, name="shop", ready_timeout=60))
        env = ["-e", "MCP_HOST=0.0.0.0", "-e", "MCP_PORT=18765"]
        _side_by_side(
            ["docker", "run", "-d", "--init", "--name", db, "--network", name,
             "--network-alias", "env-orders-db", *env, db_image],
            ["docker", "run", "-d", "--init", "--name", app, "--network", name,
             "--network-alias", "env-orders", *env, app_image],
            ["sh", "-c", f"docker create --init --name {gw} --network {name} "
             f"-p 127.0.0.1::{GATEWAY_PORT} -e AGENTENV_GATEWAY_TOKEN={token} {gateway} "
             f"{command} >/dev/null && docker network connect {name}-edge {gw} && "
             f"docker start {gw} >/dev/null"])
        port = subprocess.run(["docker", "port", gw, str(GATEWAY_PORT)],
                              capture_output=True, text=True, check=True).stdout.split(":")[-1]
        call_list_orders(f"http://127.0.0.1:{port.strip()}/t/{token}")
    finally:
        subprocess.run(["docker", "rm", "-f", db, app, gw], capture_output=True)
        subprocess.run(["docker", "network", "rm", name, f"{name}-edge"], capture_output=True,
                       check=True)
    return time.perf_counter() - start


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    with bytecode_cached():
        return _measure(quick, smoke, workdir, agent_env)


def _measure(quick: bool, smoke: bool, workdir: Path, agent_env: list[str]) -> list[Series]:
    repeat = 1 if smoke else 3 if quick else 7
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-multi-env")}
    command = [*agent_env, "run", str(bundle(workdir))]
    full_env = {**os.environ, **env}
    _agent_env(command, full_env)  # ledger, images
    output = _agent_env(command, full_env)
    images = image_of(output, "orders-db"), image_of(output, "orders"), gateway_image()
    floor_once(*images)  # the first docker run of a session pays extra; not counted
    floor: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        floor.append(floor_once(*images))
        warm += time_command(command, repeat=1, env=env)[0]
    return [
        Series(FLOOR, floor),
        Series(WARM, warm, baseline=FLOOR,
               note="CLI start, ledger check, deploy, readiness, one call, teardown"),
    ]

"""A ``website`` env (website-todo's ``todo``: backend, frontend, the Chromium browser, the
gateway) deployed and one page loaded in the browser, against the same containers started by
hand; and a screenshot through the gateway at 1280x800.

The run is ``agent-env run`` of a bundle holding website-todo's env and one task: ``deploy_env
todo`` and an ``env_outcome_verifier`` that has the browser open the site through the gateway
(``browser_navigate`` of ``http://gateway:18765/website/todo/``); then teardown. Warm: images
built and the ledger written by a first run.

The floor is that layout by hand with the docker CLI: the private and edge networks side by
side, the four containers side by side (under the names the gateway and browser reach them by,
the gateway on both networks publishing its port), the gateway's ``/ready``, the same
``browser_navigate``, everything removed. The bar (issue 34): the warm run at most 2x the floor.
Floor and warm samples alternate so drift hits both alike.

The screenshot series are ``browser_take_screenshot`` through the gateway of the hand-started
layout after ``browser_resize`` to 1280x800, and ``computer_screenshot`` of desktop-notes'
desktop (Xvfb at 1280x800, deployed with ``agent-env env deploy``), each call timed from the
client (a PNG in an MCP image content part); the bar is a median under 150 ms for each.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from bench.bars import Bar
from bench.echo_mcp import _agent_env, _post, _side_by_side, gateway_image, wait_ready
from bench.measure import Series, bytecode_cached, time_command
from bench.multi_env import image_of

FLOOR = "website floor: 2 networks + backend, frontend, browser, gateway + 1 page, by hand"
WARM = "agent-env run of website-todo's env + 1 page load in Chromium (warm)"
SHOT = "screenshot through the gateway, 1280x800 PNG"
DESKTOP_SHOT = "desktop screenshot (computer_screenshot) through the gateway, 1280x800 PNG"
BARS = (Bar(WARM, at_most=2.0), Bar(SHOT, "median", at_most=0.150, unit="s"),
        Bar(DESKTOP_SHOT, "median", at_most=0.150, unit="s"))
DESKTOP_ID = "bench-desktop"
SITE = "http://gateway:18765/website/todo/"
TASK = [
    {"id": "deploy", "type": "deploy_env", "env_id": "todo", "sandbox_type": "docker"},
    {"id": "page", "type": "env_outcome_verifier", "depends_on": ["deploy"], "env_id": "todo",
     "file_artifact_id": "one_page", "verifier_id": "page"},
]
VERIFY = f'''from agentenv_protocol.client import McpClient


async def verify(mcp_url):
    async with McpClient(mcp_url) as client:
        result = await client.call_tool("browser_navigate", {{"url": "{SITE}"}})
    return [{{"id": "loaded", "result": "Page Title: Todo" in result.text,
             "description": result.text[:200]}}]
'''


def bundle(workdir: Path) -> Path:
    """website-todo's env with one task that deploys ``todo`` and loads its page once."""
    from agentenv_agents.plugin import BUNDLES

    folder = workdir / "website-bench"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(BUNDLES / "website-todo" / "envs", folder / "envs")
    (folder / "tasks").mkdir()
    (folder / "tasks" / "deploy.json").write_text(json.dumps(TASK))
    (folder / "artifacts" / "one_page").mkdir(parents=True)
    (folder / "artifacts" / "one_page" / "verify.py").write_text(VERIFY)
    return folder


class Session:
    """One MCP session through the gateway (no library: as any client must)."""

    def __init__(self, base: str) -> None:
        self.base = base
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}}
        _, self.session = _post(f"{base}/mcp", init)
        self.ids = 1

    def call(self, name: str, arguments: dict) -> dict:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        reply, _ = _post(f"{self.base}/mcp", body, self.session)
        result = reply["result"]
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result['content']}")
        return dict(result)


def floor_once(images: tuple[str, str, str, str], shots: list[float] | None = None,
               count: int = 15) -> float:
    """The layout by hand (see the module's docstring); seconds. With ``shots``, also time
    ``count`` screenshots into it (not counted in the floor)."""
    from agentenv_mcp_env.gateway_image import GATEWAY_PORT, gateway_command

    backend, frontend, browser, gateway = images
    start = time.perf_counter()
    name = f"floor-{secrets.token_hex(4)}"
    token, site = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    be, fe, br, gw = (f"{name}-{part}" for part in ("be", "fe", "br", "gw"))
    _side_by_side(
        ["docker", "network", "create", "--internal", "-o",
         "com.docker.network.bridge.inhibit_ipv4=true", name],
        ["docker", "network", "create", f"{name}-edge"])
    try:
        command = " ".join(gateway_command(
            ["http://website-browser:18765"], name="todo", ready_timeout=60,
            internal_url="http://gateway:18765",
            websites=["todo=http://todo-website-frontend:80,http://todo-website-backend:8000"]))
        _side_by_side(
            ["docker", "run", "-d", "--init", "--name", be, "--network", name,
             "--network-alias", "todo-website-backend", "-e", "PORT=8000", backend],
            ["docker", "run", "-d", "--init", "--name", fe, "--network", name,
             "--network-alias", "todo-website-frontend", "-e", "PORT=80",
             "-e", "BACKEND_URL=http://todo-website-backend:8000", frontend],
            ["docker", "run", "-d", "--init", "--name", br, "--network", name,
             "--network-alias", "website-browser", "-e", "MCP_HOST=0.0.0.0",
             "-e", "MCP_PORT=18765", "-e", f"AGENTENV_WEBSITE_TOKEN={site}", browser],
            ["sh", "-c", f"docker create --init --name {gw} --network {name} "
             f"--network-alias gateway -p 127.0.0.1::{GATEWAY_PORT} "
             f"-e AGENTENV_GATEWAY_TOKEN={token} -e AGENTENV_WEBSITE_TOKEN={site} "
             f"{gateway} {command} >/dev/null && "
             f"docker network connect {name}-edge {gw} && docker start {gw} >/dev/null"])
        port = subprocess.run(["docker", "port", gw, str(GATEWAY_PORT)],
                              capture_output=True, text=True, check=True).stdout.split(":")[-1]
        base = f"http://127.0.0.1:{port.strip()}/t/{token}"
        wait_ready(base, 60)
        session = Session(base)
        page = session.call("browser_navigate", {"url": SITE})
        assert "Page Title: Todo" in page["content"][0]["text"], page
        if shots is not None:
            took = time.perf_counter() - start
            session.call("browser_resize", {"width": 1280, "height": 800})
            for _ in range(count):
                before = time.perf_counter()
                shot = session.call("browser_take_screenshot", {"type": "png"})
                shots.append(time.perf_counter() - before)
                assert any(p.get("type") == "image" and p.get("mimeType") == "image/png"
                           for p in shot["content"]), shot
            return took
    finally:
        subprocess.run(["docker", "rm", "-f", be, fe, br, gw], capture_output=True)
        subprocess.run(["docker", "network", "rm", name, f"{name}-edge"], capture_output=True,
                       check=True)
    return time.perf_counter() - start


def desktop_shots(workdir: Path, agent_env: list[str], env: dict[str, str],
                  count: int) -> list[float]:
    """Deploy desktop-notes' desktop (stored by a run of a one-step bundle), time ``count``
    screenshots through its gateway, tear it down."""
    import re

    from agentenv_agents.plugin import BUNDLES

    folder = workdir / "desktop-bench"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(BUNDLES / "desktop-notes" / "envs" / "desktop", folder / "envs" / "desktop")
    with (folder / "envs" / "desktop" / "env.toml").open("a") as toml:
        toml.write(f'id = "{DESKTOP_ID}"\n')
    (folder / "tasks").mkdir()
    (folder / "tasks" / "deploy.json").write_text(json.dumps(
        [{"id": "deploy", "type": "deploy_env", "env_id": "desktop", "sandbox_type": "docker"}]))
    _agent_env([*agent_env, "run", str(folder)], env)  # stored, images built
    shown = _agent_env([*agent_env, "env", "deploy", "--id", DESKTOP_ID, "--ttl-seconds", "600"],
                       env)
    fields = dict(re.findall(r"^(Instance ID|Env Gateway Url|Token): (\S+)", shown, re.M))
    try:
        session = Session(f"{fields['Env Gateway Url']}/t/{fields['Token']}")
        shots = []
        for _ in range(count):
            before = time.perf_counter()
            shot = session.call("computer_screenshot", {})
            shots.append(time.perf_counter() - before)
            assert shot["structuredContent"]["width"] == 1280, shot["structuredContent"]
        return shots
    finally:
        _agent_env([*agent_env, "env", "teardown", "--id", fields["Instance ID"]], env)


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    with bytecode_cached():
        return _measure(quick, smoke, workdir, agent_env)


def _measure(quick: bool, smoke: bool, workdir: Path, agent_env: list[str]) -> list[Series]:
    repeat = 1 if smoke else 3 if quick else 5
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-website")}
    command = [*agent_env, "run", str(bundle(workdir))]
    full_env = {**os.environ, **env}
    _agent_env(command, full_env)  # ledger, images
    output = _agent_env(command, full_env)
    images = (image_of(output, "todo/backend"), image_of(output, "todo/frontend"),
              image_of(output, "website-browser"), gateway_image())
    shots: list[float] = []
    floor_once(images, shots)  # the first docker run of a session pays extra; not counted
    floor: list[float] = []
    warm: list[float] = []
    for _ in range(repeat):
        floor.append(floor_once(images))
        warm += time_command(command, repeat=1, env=env)[0]
    return [
        Series(FLOOR, floor),
        Series(WARM, warm, baseline=FLOOR,
               note="CLI start, ledger check, deploy, readiness, one page load, teardown"),
        Series(SHOT, shots, note="browser_take_screenshot, timed from the client"),
        Series(DESKTOP_SHOT, desktop_shots(workdir, agent_env, full_env, 15),
               note="python-xlib capture, PNG by the SDK (standard library)"),
    ]

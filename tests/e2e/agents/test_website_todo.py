"""``agent-env run website-todo`` via the CLI: a website env (backend, frontend, Chromium
through Playwright MCP, the gateway) where the scripted model-agent adds an item in the browser,
offline, and nothing is left behind; and a website whose backend never answers fails its
deploy naming the backend."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker



def test_website_todo_adds_an_item_through_the_browser(agent_env: Any, left_by: Any) -> None:
    run = agent_env("run", "website-todo", timeout=900)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "tasks/add-item.json v1: passed (state: 1)" in out
    assert re.search(r"envs/website-browser: image agentenv/website-browser:[0-9a-f]{16}", out)
    assert re.search(r"envs/todo/backend: image agentenv/todo-backend:[0-9a-f]{16}", out)
    assert "with model scripted:todo_script: 7 model call(s)" in out
    assert "6 tool call(s)" in out
    assert left_by(out) == []

    # the verifier's rows: the app's state (data/get) and the browser's POST in the trajectory
    show = agent_env("task", "get-instance",
                     re.search(r"instance (\S+add-item-\w+)", out).group(1))  # type: ignore[union-attr]
    record = json.loads(show.stdout)
    text = json.dumps(record)
    assert "the app's list is ['water the plants', 'buy oat milk']" in text
    assert "1 POST /api/todos with the item went through the gateway" in text
    # the screenshot the agent took is in its stored transcript, as a PNG
    from agent_env.stores.filesystem import FilesystemObjectStore

    key = record["context"]["outputs"]["ask"]["agent_trajectory_object_key"]
    events = json.loads(FilesystemObjectStore(agent_env.state / "objects").get(key))
    shots = [image for e in events for image in e.get("images", [])]
    assert len(shots) == 1 and shots[0]["mime_type"] == "image/png"
    assert base64.b64decode(shots[0]["data"]).startswith(b"\x89PNG")
    # the explorer, in Chromium, shows the transcript with the screenshot decoded
    from explorer_page import screenshots_on_run_page

    sizes, text = screenshots_on_run_page(agent_env, record["instance_id"])
    assert len(sizes) == 1 and sizes[0][0] > 0 and sizes[0][1] > 0, sizes
    assert "browser_take_screenshot" in text and "list_website_urls" in text


def test_a_backend_that_never_answers_fails_the_deploy_naming_it(agent_env: Any, tmp_path: Path,
                                                                  left_by: Any) -> None:
    bundle = tmp_path / "broken-site"
    env = bundle / "envs" / "site"
    for role, command in (("backend", '["python", "-c", "import time; time.sleep(600)"]'),
                          ("frontend", '["python", "-m", "http.server", "80"]')):
        (env / role).mkdir(parents=True)
        (env / role / "Dockerfile").write_text(f"FROM python:3.11-slim\nCMD {command}\n")
    (env / "env.toml").write_text('type = "website"\nenvironment_name = "site"\n')
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "t.json").write_text(json.dumps([
        {"id": "deploy", "type": "deploy_env", "env_id": "site", "sandbox_type": "docker",
         "ready_timeout_seconds": 8}]))
    run = agent_env("run", str(bundle), timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "env site was not ready within 8s" in out, out
    assert "website site: its backend is unreachable or not HTTP" in out, out
    assert "--- last log lines of the site-website-backend container ---" in out, out
    assert left_by(run.stdout) == []


WAIT_VERIFY = '''"""Waits for the test's go-file (AGENTENV_TEST_GO), which never comes."""
import asyncio
import os
from pathlib import Path


async def verify(mcp_url):
    Path(os.environ["AGENTENV_TEST_WAITING"]).touch()
    while not Path(os.environ["AGENTENV_TEST_GO"]).exists():
        await asyncio.sleep(0.05)
    return [{"id": "never", "result": False, "description": "the go-file came"}]
'''


def test_a_browser_that_crashes_mid_task_ends_the_run_naming_it(
        tmp_path: Path, docker_client: Any) -> None:
    """The website-browser container killed while a step runs: the run ends at once as an
    infrastructure error naming it, and its teardown removes everything."""
    from run_children import Run, owned_by

    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "crash"
    shutil.copytree(BUNDLES / "website-todo" / "envs", bundle / "envs")
    (bundle / "artifacts" / "wait").mkdir(parents=True)
    (bundle / "artifacts" / "wait" / "verify.py").write_text(WAIT_VERIFY)
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "t.json").write_text(json.dumps([
        {"id": "deploy", "type": "deploy_env", "env_id": "todo", "sandbox_type": "docker"},
        {"id": "wait", "type": "env_outcome_verifier", "depends_on": ["deploy"],
         "env_id": "todo", "file_artifact_id": "wait", "verifier_id": "wait"}]))
    run = Run(tmp_path, str(bundle), "crash")
    try:
        run.wait_until_waiting()
        (browser,) = [c for c in owned_by(docker_client, run.pid)["containers"]
                      if c["Names"][0].endswith("website-browser")]
        docker_client.api.kill(browser["Id"])
        code, out, err = run.finish()
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.communicate()
    assert code == 1, out + err
    assert re.search(r"tasks/t.json v1: error \(infrastructure, not scored\) at step 'wait': "
                     r"env todo: env server website-browser stopped mid-run \(exited with code "
                     r"137\)", out), out
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}


MULTI_VERIFY = '''"""The multi env's one namespace (echo's and the browser's tools), its
website's page through the gateway and its seeded list through /svc/todo/."""
import json
import urllib.request

from agentenv_protocol.client import McpClient


async def verify(mcp_url):
    base = mcp_url.removesuffix("/mcp")
    async with McpClient(mcp_url) as client:
        tools = {t["name"] for t in await client.list_tools_raw()}
        page = await client.call_tool("browser_navigate",
                                      {"url": "http://gateway:18765/website/todo/"})
    request = urllib.request.Request(f"{base}/svc/todo/agentenv", data=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "data/get"}).encode())
    with urllib.request.urlopen(request, timeout=10) as resp:
        todos = json.loads(resp.read())["result"]["parts"][0]["data"]["todos"]
    return [
        {"id": "tools", "result": {"echo", "browser_navigate", "list_website_urls"} <= tools,
         "description": ", ".join(sorted(tools))},
        {"id": "page", "result": "Page Title: Todo" in page.text, "description": page.text[:120]},
        {"id": "seeded", "result": [t["text"] for t in todos] == ["water the plants"],
         "description": str(todos)},
    ]
'''


def test_a_multi_env_holds_a_website_beside_an_mcp_server(agent_env: Any, tmp_path: Path,
                                                           left_by: Any) -> None:
    from agentenv_agents.plugin import BUNDLES

    bundle = tmp_path / "suite"
    shutil.copytree(BUNDLES / "website-todo" / "envs" / "todo", bundle / "envs" / "todo")
    shutil.copytree(BUNDLES / "agents-smoke" / "envs" / "echo", bundle / "envs" / "echo")
    shutil.copytree(BUNDLES / "website-todo" / "artifacts" / "todo_seed",
                    bundle / "artifacts" / "todo_seed")
    (bundle / "envs" / "suite").mkdir()
    (bundle / "envs" / "suite" / "env.toml").write_text(
        'type = "multi"\nname = "suite"\nmcp_server_envs = ["echo"]\nwebsite_envs = ["todo"]\n')
    (bundle / "artifacts" / "check").mkdir()
    (bundle / "artifacts" / "check" / "verify.py").write_text(MULTI_VERIFY)
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "t.json").write_text(json.dumps([
        {"id": "deploy", "type": "deploy_env", "env_id": "suite", "sandbox_type": "docker"},
        {"id": "seed", "type": "load_artifact", "depends_on": ["deploy"], "env_id": "suite",
         "artifact_id": "todo_seed"},
        {"id": "check", "type": "env_outcome_verifier", "depends_on": ["seed"],
         "env_id": "suite", "file_artifact_id": "check", "verifier_id": "check"}]))
    run = agent_env("run", str(bundle), timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert "tasks/t.json v1: passed (check: 1)" in run.stdout
    assert left_by(run.stdout) == []

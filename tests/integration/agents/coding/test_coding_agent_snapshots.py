"""A coding agent's session goes into a snapshot and comes back out of it, with the real CLI.

After a first prompt, a script run in the agent's own container (where the snapshot grants may
be plain HTTP on loopback) saves the context through the agent's snapshot/v1 route into a small
object server there, DELETES the CLI's session folders, and loads the snapshot into a new
context. The next prompt, in the new context, is answered by the script's second turn only if
the CLI sent the first prompt's conversation along: its session came back from the snapshot
and the new context resumed it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_env.tasks.context import TaskContext
from agentenv_agents.steps import PromptAgent

pytestmark = pytest.mark.docker

#: Where each CLI keeps its sessions (under the agent's home folder), as found by looking: the
#: test deletes these, so only a snapshot that carries them lets the CLI resume.
FOLDERS = {"aider": [".aider-sessions"], "claude-code": [".claude/projects"],
           "codex": [".codex/sessions"], "gemini": [".gemini/tmp"],
           "opencode": [".local/share/opencode"], "openhands": [".openhands-conversations"],
           "pi": [".pi/sessions"]}

#: Run in the agent container: an in-memory object server for the grants, then save, delete
#: the session folders, load. argv: context id, new context id, session folders (JSON).
ROUND_TRIP = r'''
import json, os, shutil, sys, threading, urllib.error, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

objects = {}
class Store(BaseHTTPRequestHandler):
    def do_PUT(self):
        objects[self.path] = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.end_headers()
    def do_GET(self):
        body = objects[self.path]
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *args): pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Store)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_port}/trajectory"
grant = {"url": url, "expires_at": "2099-01-01T00:00:00Z"}
agent = f"http://127.0.0.1:{os.environ.get('A2A_PORT', '8000')}/ext/snapshot"

def call(method, body):
    request = urllib.request.Request(agent, json.dumps(body).encode(), method=method, headers={
        "Content-Type": "application/json",
        "Authorization": f"Bearer {os.environ['A2A_TOKEN']}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        sys.exit(f"{method} /ext/snapshot: HTTP {exc.code}: {exc.read().decode()}")

context, target, folders = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
saved = call("POST", {"context_id": context, "objects": {"trajectory": {
    "media_type": "application/json", "max_bytes": 50_000_000,
    "write": {"kind": "http_put", **grant}}}})
kept = json.loads(objects["/trajectory"])
for folder in folders:
    shutil.rmtree(Path.home() / folder, ignore_errors=True)
gone = [f for f in folders if not (Path.home() / f).exists()]
loaded = call("PUT", {"target_context_id": target, "objects": {"trajectory": {
    "media_type": "application/json", "max_bytes": 50_000_000,
    "read": {"kind": "http_get", **grant}}}})
print(json.dumps({"saved": saved, "loaded": loaded, "has_session": "session" in kept,
                  "gone": gone, "back": [f for f in folders if (Path.home() / f).is_dir()]}))
'''


@pytest.mark.parametrize("agent", sorted(FOLDERS))
async def test_a_snapshot_carries_the_cli_session_into_a_new_context(
        agent: str, task: tuple[TaskContext, dict[str, str]], deploy: Any,
        docker_client: Any, run_id: str) -> None:
    ctx, ids = task
    remembered = {"turns": [
        {"match": {"last_user_contains": "remember 8852"}, "text": "Noted: 8852."},
        {"match": {"last_user_contains": "What number"},
         "text": "Earlier in this session you asked me to remember 8852."}]}
    await deploy(ctx, ids, agent, {"remembered": remembered})
    await PromptAgent(id="first", agent_name=agent, prompt="Please remember 8852.",
                      model="scripted:remembered", timeout_seconds=120).run(ctx)
    assert ctx.outputs["first"]["error_type"] is None, ctx.outputs["first"]
    handle = ctx.agents[agent]
    (container,) = docker_client.containers.list(filters={"label": [
        f"agentenv.run={run_id}", "agentenv.role=agent"]})
    folders = FOLDERS[agent]
    done = container.exec_run(["python", "-c", ROUND_TRIP, handle.context_id, "forked",
                               json.dumps(folders)])
    assert done.exit_code == 0, done.output.decode()
    report = json.loads(done.output.decode().strip().splitlines()[-1])
    # deleted, then put back by the load
    assert report["has_session"] and report["gone"] == report["back"] == folders, report
    assert report["loaded"] == {"context_id": "forked"}
    handle.context_id = "forked"  # the task's next prompt goes to the loaded context
    await PromptAgent(id="again", agent_name=agent, prompt="What number did I ask about?",
                      model="scripted:remembered", timeout_seconds=120).run(ctx)
    reply = ctx.outputs["again"]
    assert reply["error_type"] is None, reply
    assert "Earlier in this session you asked me to remember 8852." in reply["response"]

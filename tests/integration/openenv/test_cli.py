"""``agent-env openenv serve``: it serves until Ctrl-C and stops cleanly; bad input is an error.

No env deploys here (nothing resets), so these need no Docker.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .conftest import EXAMPLE


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_lists_the_tasks_answers_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_env", "openenv", "serve", str(EXAMPLE), "--port",
         str(port)], env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/agentenv/tasks",
                                            timeout=2) as got:
                    listed = json.load(got)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer within 60 s"
                time.sleep(0.2)
        assert [t["name"] for t in listed["all"]] == ["todo"]
        assert listed["all"][0]["agent"] == "planner"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as health:
            assert health.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.splitlines() == [
        "all: todo", f"OpenEnv server on http://127.0.0.1:{port} (WebSocket /ws, tasks at "
        "/agentenv/tasks)"]
    assert "Traceback" not in err


def test_bad_input_is_a_clear_error_naming_the_fix(tmp_path: Path) -> None:
    """One ``Error:`` line (a bundle's problems listed under it, as ``agent-env run`` does)."""
    nothing = tmp_path / "nothing"
    (nothing / "tasks").mkdir(parents=True)
    cases = [
        ([str(tmp_path / "missing")], "is not a folder"),
        ([str(EXAMPLE), "--reward", "score"],
         "reward='score': task 'todo' records no score at a step 'score' (it records them "
         "at list_state, reply)"),
        ([str(nothing)], "the bundle has no tasks to run"),
    ]
    for args, message in cases:
        done = subprocess.run([sys.executable, "-m", "agent_env", "openenv", "serve", *args],
                              env=_env(tmp_path), capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr.startswith("Error: ") and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_each_eval_of_the_bundle_is_a_split(tmp_path: Path, state_root: Path) -> None:
    """An eval names its tasks by file name; the split lists them by their own names."""
    import shutil

    from agentenv_openenv import build_app

    bundle = tmp_path / "with-evals"
    shutil.copytree(EXAMPLE, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    (bundle / "evals").mkdir()
    (bundle / "evals" / "nightly.toml").write_text('tasks = ["tasks/todo.json"]\n')
    served = build_app(bundle).state.agentenv.describe()
    assert {split: [t["name"] for t in tasks] for split, tasks in served.items()} == {
        "all": ["todo"], "nightly": ["todo"]}
    assert served["nightly"][0]["split"] == "nightly"

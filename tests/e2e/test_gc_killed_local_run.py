"""Issue 21, class 7, as it was found: ``kill -9`` of ``agent-env run`` during a slow command in
a local sandbox, then ``agent-env gc --yes``. gc must end the command's processes (not only
remove the work folder) and mark the killed run's record ``abandoned`` with the reason."""

from __future__ import annotations

import json
import os
import signal
import time

from agent_env.sandbox.ownership import process_start


def test_gc_ends_a_killed_runs_processes_and_marks_its_record_abandoned(agent_env) -> None:
    folder = agent_env.root / "b"
    (folder / "tasks").mkdir(parents=True)
    pid_file = agent_env.root / "sleeper.pid"
    (folder / "tasks" / "slow.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "local"},
        {"id": "wait", "type": "verify_sandbox", "criteria": [
            {"type": "bash_cmd_succeeds",
             "bash_cmd": f"sleep 300 & echo $! > {pid_file}; wait"}]},
    ]))
    run = agent_env.start("run", "./b")
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.05)
    sleeper = int(pid_file.read_text())
    os.kill(run.pid, signal.SIGKILL)
    run.communicate(timeout=20)
    assert process_start(sleeper) is not None  # nothing ended it: its run was killed

    removed = agent_env("gc", "--yes")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "Removed 1 sandbox." in removed.stdout and "Marked 1 run abandoned." in removed.stdout
    instance = removed.stdout.split("abandoned:\n  ", 1)[1].split(":", 1)[0]
    deadline = time.monotonic() + 5
    while process_start(sleeper) is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # killed, then reaped by init
    assert process_start(sleeper) is None, "the killed run's command still runs"
    record = json.loads(agent_env("task", "get-instance", instance).stdout)
    assert record["status"] == "abandoned"
    assert record["abandon_reason"] == (f"its process {run.pid} is gone (killed before the run "
                                        "ended)")
    again = agent_env("gc", "--yes")
    assert again.returncode == 0 and "Nothing to remove." in again.stdout, again.stdout

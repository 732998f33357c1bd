"""Issue 31, classes 3 and 11: a scratch folder (a bundle conversion's, an env build context laid
out from the store) whose process is killed with ``kill -9`` is found and removed by
``agent-env gc``; one whose process is alive is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

HOLDER = """
import sys, time
from pathlib import Path
from agent_env.scratch import owned_scratch
with owned_scratch(sys.argv[1], Path(sys.argv[2])) as folder:
    (folder / "half-written").write_text("x")
    print(folder, flush=True)
    time.sleep(600)
"""


def _hold(prefix: str, parent: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, prefix, str(parent)], env=env,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    folder = Path(process.stdout.readline().strip())
    assert (folder / "half-written").is_file()
    return process, folder


def test_gc_removes_the_scratch_of_a_killed_process_only(tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)
    killed, dead_folder = _hold(".bundle-", tmp_path, env)
    alive, live_folder = _hold("agent-env-env-", tmp_path, env)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
        assert dead_folder.is_dir()  # kill -9 skipped its cleanup
        gc = [sys.executable, "-m", "agent_env", "gc"]
        listed = subprocess.run([*gc, "--dry-run"], env=env, capture_output=True, text=True,
                                timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert "Would remove 1 scratch folder killed commands left:" in listed.stdout
        assert f"{dead_folder} (its process {killed.pid} is gone" in listed.stdout
        assert str(live_folder) not in listed.stdout
        assert dead_folder.is_dir()
        removed = subprocess.run([*gc, "-y"], env=env, capture_output=True, text=True,
                                 timeout=60)
        assert removed.returncode == 0, removed.stderr
        assert "Removed 1 scratch folder." in removed.stdout
        assert not dead_folder.exists() and live_folder.is_dir()
    finally:
        alive.kill()
        alive.wait(timeout=10)
    # the second holder was killed too (SIGKILL above): now its folder is gc's
    again = subprocess.run([sys.executable, "-m", "agent_env", "gc", "-y"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert "Removed 1 scratch folder." in again.stdout and not live_folder.exists()

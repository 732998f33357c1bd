"""``agent-env run --agent/--model``: checked before anything is written, recorded with the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AGENT_ENV = Path(sys.executable).with_name("agent-env")


def test_an_agent_nobody_ships_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENV_")}
    env["AGENT_ENV_STATE_DIR"] = str(tmp_path / "state")
    done = subprocess.run([str(AGENT_ENV), "run", "agents-smoke", "--agent", "nosuch"],
                          capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: no agent named 'nosuch' (installed: model-agent)"
    assert done.stdout == ""  # no ledger line: nothing was stored
    assert not (tmp_path / "state" / "documents.sqlite3").exists()

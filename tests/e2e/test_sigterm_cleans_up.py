"""Issue 21, class 6: SIGTERM while the ledger writes a large artifact into the object store
cleans up as Ctrl-C does (no temporary file left, exit 143); and ``gc`` removes stale
temporary files a harder death (``kill -9``) left behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

SIZE = 400 * 1024 * 1024


def temps(state: Path) -> list[Path]:
    return [p for p in state.rglob("*%t") if p.is_file()]


@pytest.fixture
def big_bundle(agent_env) -> Path:
    folder = agent_env.root / "big"
    (folder / "tasks").mkdir(parents=True)
    (folder / "artifacts" / "blob").mkdir(parents=True)
    with open(folder / "artifacts" / "blob" / "data.bin", "wb") as out:
        out.truncate(SIZE)  # sparse: cheap to make, still SIZE bytes to copy
    (folder / "tasks" / "t.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "local"},
        {"id": "load", "type": "load_artifact", "sandbox_name": "box", "artifact_id": "blob",
         "destination_path": "/app/blob"},
    ]))
    return folder


def interrupt_mid_write(agent_env, bundle: Path, signum: int) -> tuple[int, str]:
    run = agent_env.start("run", str(bundle))
    deadline = time.monotonic() + 60
    while not temps(agent_env.state):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the artifact was never written"
        time.sleep(0.005)
    os.kill(run.pid, signum)
    out, err = run.communicate(timeout=60)
    return run.returncode, out + err


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_an_artifact_write_leaves_no_temporary_file(
        agent_env, big_bundle: Path, signum: int, code: int) -> None:
    returncode, output = interrupt_mid_write(agent_env, big_bundle, signum)
    assert returncode == code, output
    assert "Traceback" not in output
    assert temps(agent_env.state) == []


def test_gc_removes_temporary_files_a_killed_writer_left(agent_env, big_bundle: Path) -> None:
    from agent_env.sandbox.ownership import process_start

    returncode, _ = interrupt_mid_write(agent_env, big_bundle, signal.SIGKILL)
    assert returncode == -signal.SIGKILL
    left = temps(agent_env.state)
    assert left, "kill -9 runs no cleanup: the temporary file stays until gc"
    # a write in progress (this process's, named as the store names them) is never touched
    live = left[0].parent / f".{os.getpid()}.{process_start(os.getpid())}-inprogress%t"
    live.write_bytes(b"still being written")
    listing = agent_env("gc", "--dry-run")
    assert f"Would remove {len(left)} temporary file" in listing.stdout, listing.stdout
    assert str(left[0]) in listing.stdout and str(live) not in listing.stdout
    assert sorted(temps(agent_env.state)) == sorted([*left, live])
    removed = agent_env("gc", "--yes")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert f"Removed {len(left)} temporary file" in removed.stdout, removed.stdout
    assert temps(agent_env.state) == [live]

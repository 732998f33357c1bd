"""A run killed with ``kill -9`` mid-command: a later ``terminate`` (what ``agent-env gc`` calls,
from another process) ends the command's processes, not only the sandbox's folder."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from agent_env.api import SandboxSpec
from agent_env.sandbox.local import LocalSandboxProvider
from agent_env.sandbox.ownership import process_start

RUN = """
import asyncio, sys
from agent_env.api import SandboxSpec
from agent_env.sandbox.local import LocalSandboxProvider

async def main():
    sandbox = await LocalSandboxProvider(sys.argv[1]).create(SandboxSpec(name="slow"))
    print(sandbox.id, flush=True)
    # a command with a child of its own, both in the command's process group
    await sandbox.exec("sleep 300 & echo $! > /app/child.pid; echo $$ > /app/leader.pid; wait")

asyncio.run(main())
"""


async def terminate_from_its_id(provider: LocalSandboxProvider, sandbox_id: str,
                                pids: list[int]) -> None:
    """Terminate as gc does, knowing only the id; then every pid must end within 5 s."""
    found = await provider.attach(sandbox_id)
    assert found is not None
    await found.terminate()
    deadline = time.monotonic() + 5
    while any(process_start(pid) is not None for pid in pids):
        assert time.monotonic() < deadline, f"still running: {pids}"
        time.sleep(0.02)


async def test_terminate_from_another_process_ends_a_killed_runs_commands(tmp_path: Path) -> None:
    root = tmp_path / "local"
    run = subprocess.Popen([sys.executable, "-c", RUN, str(root)], stdout=subprocess.PIPE,
                           text=True)
    assert run.stdout is not None
    sandbox_id = run.stdout.readline().strip()
    app = root / sandbox_id / "app"
    deadline = time.monotonic() + 20
    while not ((app / "child.pid").exists() and (app / "leader.pid").exists()):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    time.sleep(0.05)
    pids = [int((app / name).read_text()) for name in ("leader.pid", "child.pid")]
    run.kill()  # kill -9: no teardown of its own
    run.wait()
    assert all(process_start(pid) is not None for pid in pids)  # orphans, still running

    await terminate_from_its_id(LocalSandboxProvider(root), sandbox_id, pids)
    assert not (root / sandbox_id).exists()


async def test_a_reused_pid_is_left_alone(tmp_path: Path) -> None:
    """A record whose pid now belongs to another process (another start time) kills nothing."""
    sandbox = await LocalSandboxProvider(tmp_path / "local").create(SandboxSpec(name="reuse"))
    records = sandbox.folder / "processes"
    records.mkdir()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_start(bystander.pid) not in (None, 1)
        (records / str(bystander.pid)).write_text("1", encoding="ascii")  # not its start time
        await sandbox.terminate()
        time.sleep(0.2)  # a SIGKILL would have landed by now
        assert bystander.poll() is None, "terminate killed a process the sandbox never ran"
    finally:
        bystander.kill()
        bystander.wait()


async def test_processes_that_leave_the_commands_group_end_with_the_sandbox(
        tmp_path: Path) -> None:
    """Issue 31, class 10: a command's children that outlive it in the background, in a new
    session (setsid) or ignoring hang-ups (nohup) are ended by teardown, and by gc's terminate
    from another process."""
    from agent_env.sandbox.local import marked_processes

    provider = LocalSandboxProvider(tmp_path / "local")
    sandbox = await provider.create(SandboxSpec(name="leaky"))
    result = await sandbox.exec(
        "(sleep 310 >/dev/null 2>&1 &); nohup sleep 311 >/dev/null 2>&1 & "
        "setsid sleep 312 >/dev/null 2>&1 < /dev/null & echo started")
    assert result.exit_code == 0 and "started" in result.stdout
    deadline = time.monotonic() + 5
    while len(marked_processes(sandbox.id)) < 3:
        assert time.monotonic() < deadline, marked_processes(sandbox.id)
        time.sleep(0.02)
    leftovers = marked_processes(sandbox.id)
    assert all(process_start(pid) is not None for pid in leftovers)  # the command has ended
    await terminate_from_its_id(provider, sandbox.id, leftovers)
    assert marked_processes(sandbox.id) == []

"""The local sandbox: /app mapping, sudo stripping, timeouts and refused escapes."""

import os

import pytest

from agent_env.sandbox.base import PathOutsideSandbox, SandboxSpec
from agent_env.sandbox.local import LocalSandboxProvider, strip_sudo


@pytest.fixture
async def sandbox(tmp_path):
    box = await LocalSandboxProvider(tmp_path / "boxes").create(SandboxSpec("box"))
    yield box
    await box.terminate()


async def test_files_and_commands_under_app(sandbox):
    await sandbox.put_file("/app/greeting/hello.txt", b"hello\n")
    assert (sandbox.app / "greeting/hello.txt").read_bytes() == b"hello\n"
    result = await sandbox.exec("sudo cat /app/greeting/hello.txt && pwd", cwd="/app/greeting")
    assert result.ok, result.stderr
    assert result.stdout.splitlines() == ["hello", str(sandbox.app / "greeting")]
    assert await sandbox.get_file("greeting/hello.txt") == b"hello\n"


@pytest.mark.parametrize("path", ["/etc/passwd", "/app/../etc/x", "../x", "/application/x"])
async def test_paths_outside_are_refused(sandbox, path):
    with pytest.raises(PathOutsideSandbox):
        await sandbox.put_file(path, b"x")


async def test_symlink_out_is_refused(sandbox, tmp_path):
    os.symlink(tmp_path, sandbox.app / "out")
    with pytest.raises(PathOutsideSandbox):
        await sandbox.put_file("/app/out/evil", b"x")
    with pytest.raises(PathOutsideSandbox):
        await sandbox.get_file("/app/out/boxes")


async def test_timeout_kills_the_command(sandbox):
    result = await sandbox.exec("sleep 10", timeout=0.2)
    assert result.exit_code == 124 and "timed out" in result.stderr


async def test_a_command_killed_by_a_signal_exits_128_plus_n_never_minus_one(sandbox):
    # -1 is the contract's "the sandbox was lost"; SIGHUP (1) must not read as that
    hung_up = await sandbox.exec(["python3", "-c", "import os, signal; "
                                  "os.kill(os.getpid(), signal.SIGHUP)"])
    assert (hung_up.exit_code, hung_up.lost) == (129, False)
    killed = await sandbox.exec(["python3", "-c", "import os; os.kill(os.getpid(), 9)"])
    assert killed.exit_code == 137


async def test_terminate_removes_the_folder_and_is_idempotent(tmp_path):
    provider = LocalSandboxProvider(tmp_path / "boxes")
    box = await provider.create(SandboxSpec("box", labels={"agentenv.run": "r1"}))
    assert [b.id for b in await provider.list_sandboxes({"agentenv.run": "r1"})] == [box.id]
    assert (await provider.attach(box.id)).id == box.id
    await box.terminate()
    await box.terminate()
    assert not box.folder.exists()
    assert await provider.attach(box.id) is None


def test_strip_sudo():
    assert strip_sudo("sudo -u root bash x.sh") == "bash x.sh"
    assert strip_sudo("echo pseudo") == "echo pseudo"

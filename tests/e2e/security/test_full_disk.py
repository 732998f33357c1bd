"""Issue 31, class 14: a full disk under the state root is one line naming the fix, for every
command (reads included), never a traceback. The disk is a real 256 KiB tmpfs, filled up."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip()}): needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_every_command_says_the_disk_is_full(full_disk: Path, tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(full_disk / "state"), "NO_COLOR": "1"}
    env.pop("AGENT_ENV_CONFIG", None)

    def agent_env(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent_env", *args], env=env, text=True,
                              capture_output=True, timeout=120, cwd=tmp_path)

    assert agent_env("artifact", "file", "list").returncode == 0  # the state root exists
    filler = os.open(full_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(filler, b"\0" * 4096):
            pass
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(filler)
    data = tmp_path / "big.bin"
    data.write_bytes(os.urandom(100_000))
    for args in (("artifact", "file", "put", "--id", "big", str(data)),
                 ("artifact", "file", "list"), ("run", "hello")):
        done = agent_env(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("Error: ") and "free space there" in last, done.stderr

"""What every cloud sandbox provider's own tests check beyond the conformance suite, written
once: a user without credentials gets one ``Error:`` line from the CLI, ``agent-env gc`` finds
an expired leftover by its labels, and ``run echo-mcp`` deploys, answers and tears down.

Each provider's ``test_provider.py`` calls these with its name, settings and fake; what is
particular to a service (its requests, its faults) stays there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_env.api import Sandbox, SandboxProvider, SandboxSpec

AGENT_ENV = str(Path(sys.executable).with_name("agent-env"))


def cli_without_credentials(provider: str, tmp_path: Path, *, env_prefixes: tuple[str, ...],
                            error: str, extra_env: dict[str, str] | None = None) -> None:
    """``agent-env run echo-mcp --sandbox PROVIDER`` with none of the provider's variables and
    no config: exit 1, one ``Error:`` line starting with ``error``, nothing on stdout (it is
    said before anything runs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_ENV_",
                                                                    *env_prefixes))}
    env["AGENT_ENV_STATE_DIR"] = str(tmp_path / "state")
    env.update(extra_env or {})
    done = subprocess.run([AGENT_ENV, "run", "echo-mcp", "--sandbox", provider],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith(f"Error: {error}"), done.stderr
    assert done.stdout == ""


async def gc_finds_an_expired_leftover(provider: SandboxProvider, settings: dict[str, Any],
                                       *, mode: str = "vm") -> Sandbox:
    """A sandbox whose ``agentenv.expires`` has passed is found by ``find_leftovers`` (on a
    provider the runtime builds from ``settings``), marked for removal, and terminated through
    the handle gc found (the caller checks its fake holds nothing); returns that handle."""
    from agent_env import runtime
    from agent_env.sandbox.leftovers import find_leftovers

    sandbox = await provider.create(SandboxSpec(name="left", mode=mode, labels={
        "agentenv.run": "gc-run", "agentenv.expires": str(int(time.time()) - 60)}))
    try:
        runtime.configure(sandbox={"providers": {provider.name: {"config": settings}}})
        found, skipped = await find_leftovers({"agentenv.run": "gc-run"})
        [leftover] = [f for f in found if f.provider == provider.name]
        assert (leftover.sandbox_id, leftover.remove) == (sandbox.id, True), leftover
        assert "expired" in leftover.why, leftover
        assert not [s for s in skipped if provider.name in s], skipped
        await leftover.sandbox.terminate()  # as gc removes it
        return leftover.sandbox
    except BaseException:
        await sandbox.terminate()
        raise


def run_echo_mcp(provider: str, settings: dict[str, Any],
                 capsys: pytest.CaptureFixture[str]) -> str:
    """``run echo-mcp --sandbox PROVIDER`` in this process, configured with ``settings``:
    it must pass; returns what it printed (the caller checks its fake was cleaned up)."""
    from agent_env import runtime
    from agent_env.cli.run_cmd import run_bundle

    runtime.configure(sandbox={"providers": {provider: {"config": settings}}})
    code = run_bundle("echo-mcp", sandbox=provider)
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "passed" in out.out, out.out
    return out.out

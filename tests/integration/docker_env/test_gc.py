"""``agent-env gc``'s verdicts on the real engine, through the provider contract."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import pytest

from agent_env.sandbox.base import SandboxSpec
from agent_env.sandbox.leftovers import find_leftovers, remove
from agent_env.sandbox.ownership import OWNER_LABEL, owner_label, owner_state, parse_owner
from agentenv_docker_env.sandbox import DockerSandboxProvider

pytestmark = pytest.mark.docker


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_owner_labels_tell_live_gone_and_reused_pids() -> None:
    mine = owner_label()
    assert parse_owner(mine)["pid"] == str(os.getpid())
    assert owner_state(mine).alive is True
    assert owner_state(owner_label(_dead_pid())).alive is False
    reused = mine.replace(f"start={parse_owner(mine)['start']}", "start=1")
    assert owner_state(reused).alive is False and "another one" in owner_state(reused).why
    rebooted = mine.replace(f"boot={parse_owner(mine)['boot']}", "boot=not-this-boot")
    if parse_owner(mine)["boot"] != "-":
        assert owner_state(rebooted).alive is False
    elsewhere = mine.replace("host=", "host=other-")
    assert owner_state(elsewhere).alive is None  # only its TTL can judge it from here
    assert owner_state(None).alive is None


async def test_expired_sandboxes_go_even_with_a_live_owner(
    docker_client: Any, run_id: str
) -> None:
    provider = DockerSandboxProvider()
    expired = await provider.create(SandboxSpec(
        name="old", mode="vm", ttl_seconds=1, labels={"agentenv.run": run_id}))
    fresh = await provider.create(SandboxSpec(
        name="new", mode="vm", ttl_seconds=3600, labels={"agentenv.run": run_id}))
    assert expired.labels[OWNER_LABEL] == owner_label()
    await asyncio.sleep(1.5)
    found, _ = await find_leftovers({"agentenv.run": run_id})
    verdicts = {f.sandbox_id: f for f in found if f.provider == "docker"}
    assert verdicts[expired.id].remove and verdicts[expired.id].why.startswith("expired at")
    assert not verdicts[fresh.id].remove and verdicts[fresh.id].live
    assert await remove([verdicts[expired.id]]) == []
    assert await provider.attach(expired.id) is None
    assert await provider.attach(fresh.id) is not None
    await fresh.terminate()


async def test_a_dead_owners_sandbox_is_found_from_its_labels_alone(
    docker_client: Any, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = owner_label(_dead_pid())
    monkeypatch.setattr("agent_env.sandbox.ownership.owner_label", lambda pid=None: dead)
    made = await DockerSandboxProvider().create(SandboxSpec(
        name="orphan", mode="container", labels={"agentenv.run": run_id}))
    assert made.labels[OWNER_LABEL] == dead  # the provider writes the core's owner label
    found, _ = await find_leftovers({"agentenv.run": run_id})
    (verdict,) = [f for f in found if f.sandbox_id == made.id]
    assert verdict.remove and "is gone" in verdict.why
    assert await remove([verdict]) == []
    label = {"label": f"agentenv.run={run_id}"}
    assert docker_client.api.containers(all=True, filters=label) == []


async def test_gc_under_another_state_root_keeps_what_it_cannot_account_for(
    docker_client: Any, run_id: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Issue 31, class 4: a deployment's sandbox outlives its process on purpose, and only its
    own state root's ledger says so; gc under another root must leave it until it expires."""
    from agent_env import runtime
    from agent_env.sandbox.ownership import STATE_LABEL, state_label

    dead = owner_label(_dead_pid())  # as after `agent-env env deploy` has exited
    monkeypatch.setattr("agent_env.sandbox.ownership.owner_label", lambda pid=None: dead)
    made = await DockerSandboxProvider().create(SandboxSpec(
        name="deployed", mode="container", ttl_seconds=600, labels={"agentenv.run": run_id}))
    first = state_label()
    assert made.labels[STATE_LABEL] == first
    monkeypatch.setenv("AGENT_ENV_STATE_DIR", str(tmp_path / "other"))
    runtime.reset()
    try:
        found, _ = await find_leftovers({"agentenv.run": run_id})
        (verdict,) = [f for f in found if f.sandbox_id == made.id]
        assert not verdict.remove
        assert f"made under state root {first} until it expires" in verdict.why
    finally:
        monkeypatch.undo()
        runtime.reset()
    found, _ = await find_leftovers({"agentenv.run": run_id})  # its own root judges it
    (verdict,) = [f for f in found if f.sandbox_id == made.id]
    assert verdict.remove and "is gone" in verdict.why
    assert await remove([verdict]) == []

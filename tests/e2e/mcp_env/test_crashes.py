"""Runs that die, are interrupted, or lose their env, as a user sees them; and ``agent-env gc``.

Each test finds what a run created by the ``agentenv.owner`` label naming the run's pid, so
other work on the same Docker daemon is never touched. The slow bundle is echo-mcp with a
verify.py that signals it is waiting and then waits for the test's go-file: a test can act
while a run is mid-way (kill it, kill its env) and the env image is the cached echo image.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from run_children import Run, gc, names, owned_by

pytestmark = pytest.mark.docker

AGENT_ENV = Path(sys.executable).with_name("agent-env")

SLOW_VERIFY = '''"""echo-mcp's check, once the test lets it go (AGENTENV_TEST_GO appears)."""
import asyncio
import os
import time
from pathlib import Path

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

SENT = "hello from agent-env"


async def verify(mcp_url):
    Path(os.environ["AGENTENV_TEST_WAITING"]).touch()
    go = Path(os.environ["AGENTENV_TEST_GO"])
    while not go.exists():
        await asyncio.sleep(0.05)
    async with streamable_http_client(mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            started = time.monotonic()
            result = await session.call_tool("echo", {"text": SENT})
            took = time.monotonic() - started
    text = "".join(getattr(part, "text", "") for part in result.content)
    return [{"id": "echoes", "result": not result.isError and text == SENT,
             "description": f"echo returned {text!r} after {took:.2f}s"}]
'''


@pytest.fixture
def slow_bundle(tmp_path: Path) -> Path:
    from agentenv_mcp_env.plugin import BUNDLES

    bundle = tmp_path / "slow-echo"
    shutil.copytree(BUNDLES / "echo-mcp", bundle)
    (bundle / "artifacts" / "check_echo" / "verify.py").write_text(SLOW_VERIFY)
    return bundle


def record(state: Path, instance_id: str) -> dict[str, Any]:
    """The run's instance record, as ``agent-env task get-instance`` prints it."""
    import json

    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state)}
    env.pop("AGENT_ENV_CONFIG", None)
    shown = subprocess.run([str(AGENT_ENV), "task", "get-instance", instance_id], env=env,
                           capture_output=True, text=True, timeout=60, check=True)
    return dict(json.loads(shown.stdout))


@pytest.fixture
def runs(docker_client: Any) -> Iterator[list[Run]]:
    """Runs a test starts; any still alive are killed and what they own removed afterwards."""
    started: list[Run] = []
    yield started
    for run in started:
        if run.process.poll() is None:
            run.process.kill()
            run.process.communicate()
        for container in owned_by(docker_client, run.pid)["containers"]:
            docker_client.api.remove_container(container["Id"], force=True)
        for network in owned_by(docker_client, run.pid)["networks"]:
            docker_client.api.remove_network(network["Id"])


def test_gc_removes_what_a_killed_run_left_and_keeps_a_live_runs(
    tmp_path: Path, slow_bundle: Path, docker_client: Any, runs: list[Run]
) -> None:
    dead = Run(tmp_path, str(slow_bundle), "dead")
    live = Run(tmp_path, str(slow_bundle), "live")
    runs += [dead, live]
    dead.wait_until_waiting()
    live.wait_until_waiting()
    left = owned_by(docker_client, dead.pid)
    # env, gateway and the sandbox's DNS answerer
    assert len(left["containers"]) == 3 and len(left["networks"]) >= 1, names(left)
    dead_run = left["containers"][0]["Labels"]["agentenv.run"]
    dead_sandbox = left["containers"][0]["Labels"]["agentenv.sandbox"]
    live_found = owned_by(docker_client, live.pid)
    live_run = live_found["containers"][0]["Labels"]["agentenv.run"]

    os.kill(dead.pid, signal.SIGKILL)  # no teardown happens: the containers stay
    dead.process.communicate()
    assert names(owned_by(docker_client, dead.pid)) == names(left)

    # Every provider is asked; the dead run's sandbox is listed for removal, the live one kept.
    listing = gc("--dry-run", state=dead.state)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    assert "Would remove" in listing.stdout, listing.stdout + listing.stderr
    removal = listing.stdout.split("Would remove", 1)[1]
    assert f"docker {dead_sandbox} (run {dead_run}): its process {dead.pid} is gone" in removal
    assert f"(run {live_run}): live run: process {live.pid} is running" in listing.stdout
    assert "Dry run: nothing was removed." in listing.stdout
    assert names(owned_by(docker_client, dead.pid)) == names(left)
    # Its run record can never end by itself: gc would mark it abandoned, and says why.
    assert (f"Would mark 1 run abandoned:\n  {dead_run}: its process {dead.pid} is gone "
            "(killed before the run ended)") in listing.stdout, listing.stdout
    assert record(dead.state, dead_run)["status"] == "running"

    # Without --yes and no terminal to ask on, nothing is removed.
    refused = gc("--label", f"agentenv.run={dead_run}", state=dead.state)
    assert refused.returncode == 1 and "pass --yes" in refused.stderr
    assert names(owned_by(docker_client, dead.pid)) == names(left)

    # Removal (scoped to these two runs: other work may share this daemon).
    kept = gc("--yes", "--label", f"agentenv.run={live_run}", state=live.state)
    assert kept.returncode == 0 and "Nothing to remove." in kept.stdout, kept.stdout
    removed = gc("--yes", "--label", f"agentenv.run={dead_run}", state=dead.state)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "Removed 1 sandbox." in removed.stdout
    assert "Marked 1 run abandoned." in removed.stdout
    assert owned_by(docker_client, dead.pid) == {"containers": [], "networks": []}
    ended = record(dead.state, dead_run)
    assert ended["status"] == "abandoned" and ended["finished_at_utc"]
    assert ended["abandon_reason"] == (f"its process {dead.pid} is gone (killed before the "
                                       "run ended)")
    assert record(live.state, live_run)["status"] == "running"  # a live run's is left alone

    # The live run never noticed: it finishes, passes and tears its own sandbox down.
    assert all(c["State"] == "running" for c in owned_by(docker_client, live.pid)["containers"])
    live.go.touch()
    code, out, err = live.finish()
    assert code == 0, out + err
    assert "tasks/smoke.json v1: passed (echoes: 1)" in out
    assert owned_by(docker_client, live.pid) == {"containers": [], "networks": []}


@pytest.mark.parametrize("delay", [0.0, 0.25, 0.6])
def test_sigint_during_deploy_exits_130_and_leaves_nothing(
    tmp_path: Path, docker_client: Any, runs: list[Run], delay: float
) -> None:
    run = Run(tmp_path, "echo-mcp", "interrupted")
    runs.append(run)
    run.wait_for_line(r"step 1/2 deploy \(deploy_env\)")
    time.sleep(delay)  # 0: choosing the provider; later: networks, containers, readiness
    run.process.send_signal(signal.SIGINT)
    code, out, err = run.finish()
    assert code == 130, out + err
    assert "cancelled by Ctrl-C" in err
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}
    for instance in re.findall(r"instance (\S+)", out):
        label = {"label": f"agentenv.run={instance}"}
        assert docker_client.containers.list(all=True, filters=label) == []
        assert docker_client.networks.list(filters=label) == []


def test_env_container_killed_mid_run_fails_clearly_and_leaves_nothing(
    tmp_path: Path, slow_bundle: Path, docker_client: Any, runs: list[Run]
) -> None:
    run = Run(tmp_path, str(slow_bundle), "lost-env")
    runs.append(run)
    run.wait_until_waiting()
    (env,) = [c for c in owned_by(docker_client, run.pid)["containers"]
              if c["Labels"].get("agentenv.container") == "env"]
    killed = time.monotonic()
    docker_client.api.kill(env["Id"])
    # The verifier never gets its go: the run notices the dead env server by itself (the
    # deployment's watch) and ends within a second, not at the next tool call.
    code, out, err = run.finish()
    ended = time.monotonic() - killed
    assert code == 1, out + err
    # An env that died is infrastructure's doing: the run is an error, not a score of 0, on
    # the step that was running, naming the container and its exit status.
    assert re.search(r"tasks/smoke.json v1: error \(infrastructure, not scored\) at step "
                     r"'echoes': env echo: env server env stopped mid-run \(exited with code "
                     r"137\) \(the run stopped\)", out), out
    assert "1 run: 1 infrastructure error (not scored)" in out
    assert "Tore down 1 sandbox." in out
    assert ended < 5, f"the run took {ended:.1f}s to end after the kill (teardown included)"
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}


def test_gc_removes_local_work_folders_of_dead_runs(tmp_path: Path) -> None:
    """The core's own ``local`` provider: its work folders record their owner's pid."""
    import asyncio
    import json

    from agent_env.sandbox.base import SandboxSpec
    from agent_env.sandbox.local import LocalSandboxProvider

    state = tmp_path / "state"
    provider = LocalSandboxProvider(root=state / "sandboxes" / "local")

    async def make(run: str) -> Any:
        return await provider.create(SandboxSpec(name=run, labels={"agentenv.run": run}))

    dead_run, live_run = f"gc-dead-{os.getpid()}", f"gc-live-{os.getpid()}"
    dead, live = asyncio.run(make(dead_run)), asyncio.run(make(live_run))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    meta = dead.folder / "sandbox.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "pid": child.pid}))

    listing = gc("--dry-run", "--label", f"agentenv.run={dead_run}", state=state)
    assert f"local {dead.id} (run {dead_run}): its process {child.pid} is gone" \
        in listing.stdout, listing.stdout + listing.stderr
    kept = gc("--yes", "--label", f"agentenv.run={live_run}", state=state)
    assert f"local {live.id} (run {live_run}): live run: process {os.getpid()} is running" \
        in kept.stdout and "Nothing to remove." in kept.stdout, kept.stdout
    removed = gc("--yes", "--label", f"agentenv.run={dead_run}", state=state)
    assert removed.returncode == 0 and "Removed 1 sandbox." in removed.stdout, removed.stdout
    assert not dead.folder.exists() and live.folder.exists()


def test_sigint_during_a_cold_build_stops_the_build(
    tmp_path: Path, docker_client: Any, runs: list[Run]
) -> None:
    """Ctrl-C does not wait minutes for ``pip install``: the engine drops the build."""
    import uuid

    from agentenv_mcp_env.plugin import BUNDLES

    bundle = tmp_path / "fresh-echo"
    shutil.copytree(BUNDLES / "echo-mcp", bundle)
    requirements = bundle / "envs" / "echo" / "requirements.txt"
    requirements.write_text(requirements.read_text() + f"# {uuid.uuid4().hex}\n")
    run = Run(tmp_path, str(bundle), "cold")
    runs.append(run)
    seen = run.wait_for_line(r"^\[tasks/smoke.json\] envs/echo: Step \d+/\d+ : RUN pip install")
    tag = next(re.search(r"building image (\S+)", line).group(1)  # type: ignore[union-attr]
               for line in seen if "building image" in line)
    time.sleep(0.5)
    started = time.monotonic()
    run.process.send_signal(signal.SIGINT)
    code, out, err = run.finish()
    assert code == 130, out + err
    assert time.monotonic() - started < 15, "Ctrl-C waited for the build"
    assert docker_client.api.images(name=tag) == []  # abandoned, never tagged
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}

"""The ray runner on a real two-node Ray cluster: runs land on both nodes, each node never runs
more than its slots at once, node-local stores are refused, cancellation is cooperative."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent_env.runtime import current, reset
from agent_env.tasks.records import StoredInstances

HELLO = Path(__file__).parents[3] / "core/agent_env/bundles/shipped/hello"
TASKS = 4
#: the agentenv_env_slots each node of the test cluster offers (conftest.py)
SLOTS_PER_NODE = 1


@pytest.fixture()
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("AGENT_ENV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("AGENT_ENV_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    reset()
    yield tmp_path
    reset()


def slow_bundle(root: Path, seconds: float) -> Path:
    """The hello bundle with TASKS copies of its task, whose check takes ``seconds``."""
    bundle = root / "hello-slow"
    shutil.copytree(HELLO, bundle)
    check = bundle / "artifacts/greeting/check.sh"
    check.write_text(f"sleep {seconds}\n" + check.read_text())
    task = json.loads((bundle / "tasks/hello.json").read_text())
    for n in range(2, TASKS + 1):
        (bundle / f"tasks/hello{n}.json").write_text(json.dumps(task))
    return bundle


def run_cli(args: list[str], config: Path) -> Any:
    import os
    import subprocess
    import sys

    env = {**os.environ, "AGENT_ENV_CONFIG": str(config)}
    return subprocess.run([sys.executable, "-m", "agent_env", *args], env=env,
                          capture_output=True, text=True, timeout=180)


def write_config(root: Path, address: str, *, shared_disk: bool) -> Path:
    path = root / "config.toml"
    path.write_text('[runner]\nimpl = "ray"\nmax_concurrency = 4\n[runner.config]\n'
                    f'address = "{address}"\nshared_disk = {str(shared_disk).lower()}\n')
    return path


def stamp(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def test_runs_spread_over_both_nodes_within_each_nodes_slots(state: Path,
                                                             ray_cluster: Any) -> None:
    config = write_config(state, ray_cluster.address, shared_disk=True)
    bundle = slow_bundle(state, 1.0)
    started = time.monotonic()
    done = run_cli(["run", str(bundle), "--json"], config)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(done.stdout)["runs"]
    assert [r["outcome"] for r in runs] == ["passed"] * TASKS, json.dumps(runs)[:3000]
    instances = StoredInstances(current().document_store)
    records = [instances.get(r["instance_id"]) for r in runs]
    nodes: dict[str, list[tuple[float, float]]] = {}
    for record in records:
        assert record is not None
        node = record.context["metadata"]["ray_node_id"]
        nodes.setdefault(node, []).append((stamp(record.started_at_utc),
                                           stamp(record.finished_at_utc or "")))
    alive = {n["NodeID"] for n in __import__("ray").nodes() if n["Alive"]}
    assert set(nodes) == alive and len(nodes) == 2  # both nodes ran some
    for spans in nodes.values():  # and a node never ran more than its slots at once
        for at, _ in spans:
            overlapping = sum(1 for s, e in spans if s <= at < e)
            assert overlapping <= SLOTS_PER_NODE, spans
    # four 1 s runs over two one-slot nodes: two rounds, not four
    assert took < 3 * TASKS, took


def test_node_local_stores_refused_on_two_nodes(state: Path, ray_cluster: Any) -> None:
    config = write_config(state, ray_cluster.address, shared_disk=False)
    done = run_cli(["run", "hello"], config)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert "2 nodes" in errors[0] and "sqlite" in errors[0] and "shared_disk" in errors[0]


def test_interrupt_cancels_cooperatively_and_leaves_nothing(state: Path,
                                                           ray_cluster: Any) -> None:
    """Ctrl-C while the run's check sleeps on a node: the run ends ``cancelled``, its actor
    tears its sandbox down (no work folder left), the command exits 130."""
    import os
    import signal
    import subprocess
    import sys

    config = write_config(state, ray_cluster.address, shared_disk=True)
    bundle = slow_bundle(state, 60.0)
    env = {**os.environ, "AGENT_ENV_CONFIG": str(config)}
    process = subprocess.Popen([sys.executable, "-m", "agent_env", "run", str(bundle), "--task",
                                "hello", "--json"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    sandboxes = state / "state/sandboxes/local"
    deadline = time.monotonic() + 60
    while not (sandboxes.is_dir() and any(sandboxes.iterdir())):
        assert process.poll() is None and time.monotonic() < deadline, "no sandbox came up"
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-2000:]
    runs = json.loads(out)["runs"]
    assert [r["outcome"] for r in runs] == ["cancelled"], runs
    assert not any(sandboxes.iterdir())


@pytest.mark.docker
def test_docker_env_runs_on_the_actors_node_and_is_torn_down(state: Path, ray_cluster: Any,
                                                             docker_client: Any) -> None:
    """echo-mcp (a real container) through the ray runner: the containers up during the run are
    owned by the actor process the record names, on a node of the cluster; none is left."""
    import os
    import subprocess
    import sys

    config = write_config(state, ray_cluster.address, shared_disk=True)
    env = {**os.environ, "AGENT_ENV_CONFIG": str(config)}
    process = subprocess.Popen([sys.executable, "-m", "agent_env", "run", "echo-mcp", "--json"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    owners: set[str] = set()
    while process.poll() is None:  # poll Docker while it runs
        for container in docker_client.api.containers(filters={"label": "agentenv.owner"}):
            owners.add(container["Labels"]["agentenv.owner"])
        time.sleep(0.1)
    out, err = process.communicate()
    assert process.returncode == 0, err[-3000:]
    (run,) = json.loads(out)["runs"]
    assert run["outcome"] == "passed", run
    record = StoredInstances(current().document_store).get(run["instance_id"])
    assert record is not None
    metadata = record.context["metadata"]
    alive = {n["NodeID"] for n in __import__("ray").nodes() if n["Alive"]}
    assert metadata["ray_node_id"] in alive
    actor_owner = f"pid={metadata['ray_worker_pid']} "
    assert any(actor_owner in owner for owner in owners), (owners, actor_owner)
    left = docker_client.api.containers(all=True, filters={"label": "agentenv.owner"})
    assert not [c for c in left if actor_owner in c["Labels"]["agentenv.owner"]]


def test_a_node_lost_mid_eval_is_retried_on_the_others(state: Path, ray_cluster: Any) -> None:
    """A third node joins, takes a run, and dies mid-run: that run ends ``error`` and is run
    again on a node left (the evals' retry), so every sample still passes."""
    import os
    import subprocess
    import sys

    import ray

    from agentenv_ray_runner.runner import SLOT_RESOURCE

    config = write_config(state, ray_cluster.address, shared_disk=True)
    bundle = slow_bundle(state, 3.0)
    published = run_cli(["run", str(bundle), "--task", "hello", "--json"], config)
    assert published.returncode == 0, published.stderr[-2000:]
    task_id = json.loads(published.stdout)["runs"][0]["task_id"]
    extra = ray_cluster.add_node(num_cpus=1, resources={SLOT_RESOURCE: SLOTS_PER_NODE})
    ray_cluster.wait_for_nodes()
    env = {**os.environ, "AGENT_ENV_CONFIG": str(config)}
    process = subprocess.Popen([sys.executable, "-m", "agent_env", "task", "run", "--id",
                                task_id, "--k", "3"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while True:  # until the extra node's slot is taken
        free = ray.available_resources().get(SLOT_RESOURCE, 0)
        if free == 0:
            break
        assert process.poll() is None and time.monotonic() < deadline, free
        time.sleep(0.1)
    ray_cluster.remove_node(extra, allow_graceful=False)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, (out + err)[-3000:]
    assert "3 runs: 3 passed" in out, out
    assert "retrying" in out + err, (out + err)[-3000:]  # the lost run was run again

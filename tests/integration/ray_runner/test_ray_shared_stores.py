"""The ray runner with stores the cluster shares (issue 15 point 3): on the two-node test
cluster, with the document store on DynamoDB and the object store on S3 (moto's server, no
shared disk), an eval's results from both nodes land in one place, and an eval interrupted on
the driver is resumed by a new driver process, which runs exactly the missing slots."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_moto import CREDENTIALS, REGION, start_moto

from agent_env.runtime import current, reset
from agent_env.tasks.records import StoredInstances

HELLO = Path(__file__).parents[3] / "core/agent_env/bundles/shipped/hello"
GREETING = "@local/agentenv-framework/hello/greeting"


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = start_moto(tmp_path_factory, "moto-ray")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture()
def shared(tmp_path: Path, moto_url: str, ray_cluster: Any,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A config: ray runner on the test cluster (no shared disk), DynamoDB and S3 on moto."""
    name = f"agentenv-ray-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "config.toml"
    config.write_text(f"""
[runner]
impl = "ray"
max_concurrency = 2
[runner.config]
address = "{ray_cluster.address}"
[stores.document]
backend = "dynamodb"
table = "{name}"
create_table = true
endpoint_url = "{moto_url}"
region = "{REGION}"
[stores.object]
backend = "s3"
bucket = "{name}"
create_bucket = true
endpoint_url = "{moto_url}"
region = "{REGION}"
addressing_style = "path"
""")
    for variable, value in (("AWS_ACCESS_KEY_ID", CREDENTIALS["access_key_id"]),
                            ("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret_access_key"]),
                            ("AWS_DEFAULT_REGION", REGION),
                            ("AWS_EC2_METADATA_DISABLED", "true"),
                            ("AGENT_ENV_CONFIG", str(config)),
                            ("AGENT_ENV_STATE_DIR", str(tmp_path / "state"))):
        monkeypatch.setenv(variable, value)
    monkeypatch.chdir(tmp_path)
    reset()
    yield tmp_path, name
    reset()


def cli(*args: str, **popen: Any) -> Any:
    command = [sys.executable, "-m", "agent_env", *args]
    if popen:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(command, capture_output=True, text=True, timeout=240)


def test_an_eval_on_two_nodes_lands_in_s3_and_resumes_from_a_new_driver(
        shared: tuple[Path, str], moto_url: str) -> None:
    import boto3

    root, bucket = shared
    published = cli("run", "hello")  # the greeting artifact, now in S3
    assert published.returncode == 0, published.stderr[-3000:]
    steps = json.loads((HELLO / "tasks/hello.json").read_text())
    steps[1]["artifact_id"] = GREETING
    steps[2]["criteria"][1]["bash_cmd"] = "sleep 0.8 && bash check.sh"
    (root / "slow.json").write_text(json.dumps(steps))
    assert cli("task", "create", "slow.json", "--id", "slow").returncode == 0
    (root / "eval.json").write_text(json.dumps(["slow"]))
    assert cli("eval", "create", "eval.json", "--id", "slow").returncode == 0

    first = cli("eval", "run", "--id", "slow", "--k", "6", popen=True)
    seen: list[str] = []
    deadline = time.monotonic() + 120
    while len([s for s in seen if "passed" in s]) < 2 and time.monotonic() < deadline:
        seen.append(first.stdout.readline())
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, ("".join(seen) + out + err)[-3000:]
    found = re.search(r"Interrupted: (\d+) of 6 runs done; resume with: agent-env eval run "
                      r"--id slow --resume (evalrun-\w+)", err)
    assert found, err[-2000:]
    done, group = int(found.group(1)), found.group(2)
    assert 2 <= done < 6

    resumed = cli("eval", "run", "--id", "slow", "--resume", group, "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    runs = json.loads(resumed.stdout)["runs"]
    assert sorted(r["sample"] for r in runs) == [1, 2, 3, 4, 5, 6]
    assert all(r["outcome"] == "passed" for r in runs), runs
    assert len([r for r in runs if not r["reused"]]) == 6 - done

    # every record is in DynamoDB, written by the node that ran it: both nodes did
    instances = StoredInstances(current().document_store)
    records = [instances.get(r["instance_id"]) for r in runs]
    assert all(record is not None for record in records)
    nodes = {record.context["metadata"]["ray_node_id"] for record in records if record}
    alive = {n["NodeID"] for n in __import__("ray").nodes() if n["Alive"]}
    assert len(nodes) == 2 and nodes <= alive, nodes
    # the artifact and the runs' objects are in the one S3 bucket, nothing on a node's disk
    s3 = boto3.session.Session().client("s3", endpoint_url=moto_url, region_name=REGION)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys, "nothing landed in S3"
    objects = root / "state" / "objects"
    assert not objects.exists() or not any(objects.rglob("*")), list(objects.rglob("*"))[:5]

"""``agent-env`` as a subprocess with its stores on moto, and without the plugin or boto3.

End to end: ``agent-env run hello`` with a config file selecting the ``dynamodb`` document
store and the ``s3`` object store (credentials as ``env:`` references), then the run's records
and objects are read back from moto with plain boto3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HELLO_DOCS = ("entity_tasks", "entity_artifacts", "task_instances")
KEYS = {"HELLO_AWS_KEY": "AKIAHELLOHELLOHELLO0", "HELLO_AWS_SECRET": "hello"}


def agent_env(
    tmp_path: Path, *args: str, config: str | None = None, python: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "AGENT_ENV_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1", **env}
    environ.pop("AGENT_ENV_CONFIG", None)
    if config is not None:
        path = tmp_path / "config.toml"
        path.write_text(config)
        environ["AGENT_ENV_CONFIG"] = str(path)
    argv = [sys.executable, "-c", python, *args] if python else [
        sys.executable, "-m", "agent_env", *args]
    return subprocess.run(argv, cwd=tmp_path, env=environ, text=True, capture_output=True,
                          timeout=120)


def moto_config(moto_server: str, name: str) -> str:
    """Documents on DynamoDB with ``env:`` credentials, objects on S3 with ``secret:`` ones."""
    return textwrap.dedent(f"""\
        [stores.secret]
        backend = "local"
        use_environment = false
        values = {{ hello_aws_key = "AKIASECRETSECRETSEC0", hello_aws_secret = "from-secrets" }}

        [stores.document]
        backend = "dynamodb"
        table = "{name}"
        create_table = true
        region = "us-east-1"
        endpoint_url = "{moto_server}"
        access_key_id = "env:HELLO_AWS_KEY"
        secret_access_key = "env:HELLO_AWS_SECRET"

        [stores.object]
        backend = "s3"
        bucket = "{name}"
        create_bucket = true
        prefix = "hello-run"
        region = "us-east-1"
        endpoint_url = "{moto_server}"
        access_key_id = "secret:hello_aws_key"
        secret_access_key = "secret:hello_aws_secret"
        """)


def test_hello_runs_on_moto_backed_stores(
    tmp_path: Path, moto_server: str, boto: Callable[[str], Any], unique_name: str
) -> None:
    config = moto_config(moto_server, unique_name)
    first = agent_env(tmp_path, "run", "hello", config=config, **KEYS)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines()[:2] == [
        "artifacts/greeting: v1 (new)", "tasks/hello.json: v1 (new)"]
    second = agent_env(tmp_path, "run", "hello", config=config, **KEYS)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[:2] == [
        "artifacts/greeting: v1, unchanged", "tasks/hello.json: v1, unchanged"]

    # the records, read straight from DynamoDB
    dynamodb = boto("dynamodb")
    docs: dict[str, list[dict[str, Any]]] = {}
    for collection in HELLO_DOCS:
        items = dynamodb.query(
            TableName=unique_name, KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"d|{collection}"}},
        )["Items"]
        docs[collection] = [json.loads(item["doc"]["S"]) for item in items]
    [task] = docs["entity_tasks"]
    assert task["id"].endswith("/hello") and task["version"] == 1
    [artifact] = docs["entity_artifacts"]
    assert artifact["id"].endswith("/greeting") and artifact["version"] == 1
    instances = docs["task_instances"]
    assert len(instances) == 2 and all(d["status"] == "completed" for d in instances)
    assert {d["_id"] for d in instances} == {
        line.rsplit("instance ", 1)[1] for run in (first, second)
        for line in run.stdout.splitlines() if "instance " in line
    }

    # the artifact's files, read straight from S3
    s3 = boto("s3")
    listed = s3.list_objects_v2(Bucket=unique_name, Prefix="hello-run/")["Contents"]
    assert listed, "the run stored no objects"
    contents = [s3.get_object(Bucket=unique_name, Key=o["Key"])["Body"].read() for o in listed]
    assert any(b"hello" in c for c in contents)

    shown = agent_env(tmp_path, "task", "get-instance", instances[0]["_id"], config=config, **KEYS)
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "completed"


def test_plugin_list_shows_aws_stores_active(tmp_path: Path) -> None:
    listed = agent_env(tmp_path, "plugin", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)["plugins"]
    [mine] = [r for r in records if r["package"] == "agentenv-framework-aws-stores"]
    assert mine["status"] == "active", mine
    text = agent_env(tmp_path, "plugin", "list").stdout
    [line] = [x for x in text.splitlines() if x.startswith("agentenv-framework-aws-stores ")]
    assert "4 stores" in line and line.rstrip().endswith("active")


def test_hello_runs_with_the_plugin_turned_off(tmp_path: Path, moto_server: str) -> None:
    ran = agent_env(tmp_path, "-p", "no:aws_stores", "run", "hello")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    refused = agent_env(tmp_path, "-p", "no:aws_stores", "run", "hello",
                        config=moto_config(moto_server, "unused"), **KEYS)
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == (  # installed, so: not "pip install", but why
        "Error: the 'dynamodb' document store comes from the aws_stores plugin, which is "
        "installed but skipped (disabled: turned off with -p no:NAME); see "
        "`agent-env plugin show aws_stores`"
    )


NEVER_IMPORTS_BOTO3 = """
import sys
import agent_env
assert "boto3" not in sys.modules and "botocore" not in sys.modules, "import agent_env"
from agent_env.cli.entry import main
for argv in (["plugin", "list"], ["run", "hello"]):
    sys.argv = ["agent-env", *argv]
    try:
        main()
    except SystemExit as exit:
        assert exit.code in (0, None), (argv, exit.code)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("boto3", "botocore"))
    assert not loaded, (argv, loaded[:5])
assert "agentenv_aws_stores.plugin" in sys.modules  # the plugin was loaded, cheaply:
assert "agentenv_aws_stores.dynamodb" not in sys.modules  # store modules wait to be chosen
print("boto3 never imported")
"""

WITHOUT_BOTO3 = """
import sys
class NoAws:  # a venv where boto3 is not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("boto3", "botocore"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoAws())
sys.argv = ["agent-env", "run", "hello"]
from agent_env.cli.entry import main
main()
"""


def test_the_core_and_cli_never_import_boto3(tmp_path: Path) -> None:
    checked = agent_env(tmp_path, python=NEVER_IMPORTS_BOTO3)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "boto3 never imported" in checked.stdout


def test_hello_runs_where_boto3_is_not_installed(tmp_path: Path) -> None:
    ran = agent_env(tmp_path, python=WITHOUT_BOTO3)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "tasks/hello.json v1: passed" in ran.stdout


@pytest.mark.parametrize("kind", ["document", "object"])
def test_settings_are_checked_by_name(tmp_path: Path, kind: str) -> None:
    backend = {"document": "dynamodb", "object": "s3"}[kind]
    config = f'[stores.{kind}]\nbackend = "{backend}"\nbukcet = "typo"\n'
    ran = agent_env(tmp_path, "run", "hello", config=config)
    assert ran.returncode == 1
    assert "unknown setting(s) bukcet" in ran.stderr

"""Env state on the real engine: ``agent-env run shared-db`` deploys a PostgreSQL beside two MCP
servers (one schema each; one reads what the other wrote), and a durable state made with ``env
init-env-state`` keeps its rows from one deploy to the next until ``env teardown-env-state``
removes them."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

pytestmark = pytest.mark.docker

BOOKS = "@local/agentenv-framework-mcp-env/shared-db/books"


async def _call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> Any:
    from agentenv_protocol.client import McpClient

    async with McpClient(url, headers={"Authorization": f"Bearer {token}"}) as client:
        return json.loads((await client.call_tool(tool, arguments)).text)


def _deploy(agent_env: Any, *extra: str) -> dict[str, Any]:
    done = agent_env("env", "deploy", "--id", BOOKS, *extra, "--json", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_shared_db_runs_two_servers_over_one_state_store(agent_env: Any, left_by: Any) -> None:
    done = agent_env("run", "shared-db", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "envs/books: service servicedb ready" in done.stdout + done.stderr
    assert "tasks/share.json v1: passed (books: 1)" in done.stdout, done.stdout
    assert left_by(done.stdout) == []


def test_a_durable_state_keeps_its_rows_between_deploys(agent_env: Any,
                                                        docker_client: Any) -> None:
    stored = agent_env("run", "shared-db", timeout=900)  # stores the envs (and checks them)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    wrong = agent_env("env", "init-env-state", "--id", BOOKS, "--env-state-type", "redis")
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == ("Error: --env-state-type redis: envs of type 'multi' back "
                                    "no such env state (they back: local_postgres)")
    made = agent_env("env", "init-env-state", "--id", BOOKS, "--env-state-type",
                     "local_postgres")
    assert made.returncode == 0, made.stderr
    assert "  schemas:   ledger, audit" in made.stdout
    found = re.search(r"^Env State Instance ID: (esi-[a-z0-9]{12})$", made.stdout, re.M)
    assert found, made.stdout
    esi = found.group(1)
    volume = f"agentenv-state-{esi}"

    first = _deploy(agent_env, "--env-state-instance-id", esi)
    mcp = first["urls"]["mcp"]
    asyncio.run(_call(mcp, first["token"], "add_entry", {"text": "kept across deploys"}))
    assert agent_env("env", "teardown", "--id", first["instance_id"]).returncode == 0
    assert [v.name for v in docker_client.volumes.list(filters={"name": volume})] == [volume]

    second = _deploy(agent_env, "--env-state-instance-id", esi)
    read = asyncio.run(_call(second["urls"]["mcp"], second["token"], "ledger_entries", {}))
    assert read == {"entries": ["kept across deploys"]}
    assert agent_env("env", "teardown", "--id", second["instance_id"]).returncode == 0

    fresh = _deploy(agent_env, "--env-state-type", "local_postgres")  # a run's own store
    read = asyncio.run(_call(fresh["urls"]["mcp"], fresh["token"], "ledger_entries", {}))
    assert read == {"entries": []}
    assert agent_env("env", "teardown", "--id", fresh["instance_id"]).returncode == 0

    gone = agent_env("env", "teardown-env-state", "--instance-id", esi)
    assert gone.returncode == 0, gone.stderr
    assert docker_client.volumes.list(filters={"name": volume}) == []
    again = agent_env("env", "teardown-env-state", "--instance-id", esi)
    assert again.stdout.strip() == f"No env state instance {esi} found; nothing to tear down."
    late = agent_env("env", "deploy", "--id", BOOKS, "--env-state-instance-id", esi)
    assert late.returncode == 1
    assert f"env_state_instance_id {esi}: no such env state instance" in late.stderr


def test_a_snapshot_keeps_the_seeded_rows_and_a_stale_one_is_refused(
        agent_env: Any, docker_client: Any, tmp_path: Any) -> None:
    """env snapshot saves the deployment's servers and its state store with their data; a
    deploy from it starts with the rows; once an env server changes, the snapshot is refused
    naming it; a store in a durable volume cannot be snapshotted; --remove drops the images."""
    import shutil

    from agentenv_mcp_env.plugin import BUNDLES

    bundle = tmp_path / "books"
    shutil.copytree(BUNDLES / "shared-db", bundle)
    stored = agent_env("run", str(bundle), timeout=900)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    books = "@local" + str(bundle) + "/books"
    first = agent_env("env", "deploy", "--id", books, "--env-state-type", "local_postgres",
                      "--json", timeout=300)
    assert first.returncode == 0, first.stderr
    deployed = json.loads(first.stdout)
    for text in ("one", "two"):
        asyncio.run(_call(deployed["urls"]["mcp"], deployed["token"], "add_entry",
                          {"text": text}))
    saved = agent_env("env", "snapshot", "--instance-id", deployed["instance_id"], timeout=300)
    assert saved.returncode == 0, saved.stderr
    assert "Saved db-mcp, env-audit, env-ledger, servicedb of env" in saved.stdout
    snap = re.search(r"^Snapshot ID: (snap-[a-z0-9]{12})$", saved.stdout, re.M)
    assert snap, saved.stdout
    assert agent_env("env", "teardown", "--id", deployed["instance_id"]).returncode == 0

    again = agent_env("env", "deploy", "--id", books, "--from-snapshot", snap.group(1),
                      "--json", timeout=300)
    assert again.returncode == 0, again.stderr
    restored = json.loads(again.stdout)
    read = asyncio.run(_call(restored["urls"]["mcp"], restored["token"], "ledger_entries", {}))
    assert read == {"entries": ["one", "two"]}
    assert agent_env("env", "teardown", "--id", restored["instance_id"]).returncode == 0

    server = bundle / "envs" / "ledger" / "server.py"
    server.write_text(server.read_text() + "\n# changed after the snapshot\n")
    assert agent_env("run", str(bundle), timeout=900).returncode == 0
    stale = agent_env("env", "deploy", "--id", books, "--from-snapshot", snap.group(1),
                      timeout=300)
    assert stale.returncode == 1
    assert (f"snapshot {snap.group(1)} is stale: env-ledger did not start from it (the env "
            "changed since it was saved)") in stale.stderr

    made = agent_env("env", "init-env-state", "--id", books, "--env-state-type",
                     "local_postgres")
    esi = re.search(r"Env State Instance ID: (\S+)", made.stdout)
    assert esi, made.stdout
    durable = json.loads(agent_env("env", "deploy", "--id", books, "--env-state-instance-id",
                                   esi.group(1), "--json", timeout=300).stdout)
    refused = agent_env("env", "snapshot", "--instance-id", durable["instance_id"])
    assert refused.returncode == 1
    assert "container 'servicedb' keeps its files in volume" in refused.stderr
    assert agent_env("env", "teardown", "--id", durable["instance_id"]).returncode == 0
    assert agent_env("env", "teardown-env-state", "--instance-id", esi.group(1)).returncode == 0

    removed = agent_env("env", "snapshot", "--remove", snap.group(1))
    assert removed.stdout.strip() == f"Removed snapshot {snap.group(1)} and its images."
    assert not [i for i in docker_client.images.list(filters={
        "label": f"agentenv.snapshot={snap.group(1)}"})]


def test_a_stored_service_db_runs_in_place_of_the_built_in_store(
        agent_env: Any, docker_client: Any, tmp_path: Any) -> None:
    """``env service-db put --context`` stores a store of one's own; ``env deploy --service-db``
    runs it as the env state's store (its marker file is in the running container), and the
    servers keep their rows in it as in the built-in one."""
    import shutil

    from agentenv_mcp_env.state import CONTEXT

    stored = agent_env("run", "shared-db", timeout=900)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    context = tmp_path / "store"
    shutil.copytree(CONTEXT, context)
    with (context / "Dockerfile").open("a") as dockerfile:
        dockerfile.write('\nRUN echo "our own store" > /etc/agentenv-store\n')
    put = agent_env("env", "service-db", "put", "--id", "t/db", "--context", str(context))
    assert put.returncode == 0 and put.stdout.strip() == "env t/db: v1 (new)", put.stderr
    nothing = agent_env("env", "deploy", "--id", BOOKS, "--service-db", "t/db")
    assert nothing.stderr == ("Error: --service-db t/db: it runs an env state's store; give "
                              "--env-state-type (or --env-state-instance-id) too\n")
    wrong = agent_env("env", "deploy", "--id", BOOKS, "--env-state-type", "local_postgres",
                      "--service-db", BOOKS)
    assert wrong.stderr == (f"Error: --service-db {BOOKS}: env '{BOOKS}' is of type 'multi', "
                            "not an env state store type (service_db)\n")
    deployed = _deploy(agent_env, "--env-state-type", "local_postgres", "--service-db", "t/db")
    try:
        labelled = {"label": f"agentenv.deployment={deployed['instance_id']}"}
        (store,) = [c for c in docker_client.containers.list(filters=labelled)
                    if c.name.endswith("-servicedb")]
        assert store.exec_run("cat /etc/agentenv-store").output == b"our own store\n"
        mcp = deployed["urls"]["mcp"]
        asyncio.run(_call(mcp, deployed["token"], "add_entry", {"text": "in our store"}))
    finally:
        down = agent_env("env", "teardown", "--id", deployed["instance_id"], timeout=120)
        assert down.returncode == 0, down.stderr


WAIT_VERIFY = '''"""Says it is waiting, then waits for a go-file that never comes here."""
import asyncio
import os
from pathlib import Path


async def verify(mcp_url):
    Path(os.environ["AGENTENV_TEST_WAITING"]).touch()
    while not Path(os.environ["AGENTENV_TEST_GO"]).exists():
        await asyncio.sleep(0.05)
    return [{"id": "never", "result": False}]
'''


def test_a_store_that_dies_mid_run_ends_the_run_as_infra(tmp_path: Any,
                                                         docker_client: Any) -> None:
    """The env state's PostgreSQL is killed while the verifier works: the run notices by itself
    within a second, says which service stopped, and leaves nothing."""
    import shutil
    import time

    from run_children import Run, owned_by

    from agentenv_mcp_env.plugin import BUNDLES

    bundle = tmp_path / "slow-db"
    shutil.copytree(BUNDLES / "shared-db", bundle)
    (bundle / "artifacts" / "check_books" / "verify.py").write_text(WAIT_VERIFY)
    run = Run(tmp_path, str(bundle), "lost-db")
    try:
        run.wait_until_waiting(timeout=600)
        (store,) = [c for c in owned_by(docker_client, run.pid)["containers"]
                    if c["Names"][0].endswith("-servicedb")]
        killed = time.monotonic()
        docker_client.api.kill(store["Id"])
        code, out, err = run.finish()
        ended = time.monotonic() - killed
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.communicate()
    assert code == 1, out + err
    assert re.search(r"tasks/share.json v1: error \(infrastructure, not scored\) at step "
                     r"'books': env books: service servicedb stopped mid-run \(exited with "
                     r"code 137\) \(the run stopped\)", out), out
    assert ended < 5, f"the run took {ended:.1f}s to end after the kill (teardown included)"
    assert owned_by(docker_client, run.pid) == {"containers": [], "networks": []}


def test_db_mcp_shows_the_store_through_the_gateway_only(agent_env: Any, docker_client: Any,
                                                         tmp_path: Any) -> None:
    """An env state's store comes with read-only MCP tools at the gateway's /env/db-mcp/mcp:
    they see what the servers wrote, refuse writes, and are none of the env's own tools;
    ``db_mcp = false`` leaves them out."""
    from agentenv_protocol.client import McpClient

    stored = agent_env("run", "shared-db", timeout=900)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    deployed = _deploy(agent_env, "--env-state-type", "local_postgres")
    token = deployed["token"]
    headers = {"Authorization": f"Bearer {token}"}

    async def look() -> tuple[list[str], Any, Any, Any]:
        async with McpClient(deployed["urls"]["mcp"], headers=headers) as app:
            own = sorted(t.name for t in await app.list_tools())
            await app.call_tool("add_entry", {"text": "seen by db-mcp"})
        async with McpClient(deployed["urls"]["db_mcp"], headers=headers) as db:
            schemas = json.loads((await db.call_tool("list_schemas")).text)["schemas"]
            rows = json.loads((await db.call_tool("query", {
                "sql": "SELECT text FROM ledger.entries"})).text)["rows"]
            write = await db.call_tool("query", {"sql": "DELETE FROM ledger.entries"})
        return own, schemas, rows, write

    try:
        own, schemas, rows, write = asyncio.run(look())
        assert not {"list_schemas", "query", "describe"} & set(own)
        assert {"ledger", "audit"} <= set(schemas)
        assert {"text": "seen by db-mcp"} in rows
        assert write.is_error and "read-only transaction" in write.text
    finally:
        agent_env("env", "teardown", "--id", deployed["instance_id"], timeout=120)
    config = tmp_path / "config.toml"
    config.write_text("[plugins.agentenv-framework-mcp-env]\ndb_mcp = false\n")
    agent_env.env["AGENT_ENV_CONFIG"] = str(config)
    lean: dict[str, Any] = {}
    try:
        lean = _deploy(agent_env, "--env-state-type", "local_postgres")
        labelled = {"label": f"agentenv.deployment={lean['instance_id']}"}
        names = [c.name for c in docker_client.containers.list(filters=labelled)]
        assert "db_mcp" not in lean["urls"] and not [n for n in names if "db-mcp" in n], names
    finally:
        agent_env.env.pop("AGENT_ENV_CONFIG")
        if lean:
            agent_env("env", "teardown", "--id", lean["instance_id"], timeout=120)

"""Deploying a seeded env from its snapshot, against deploying it and seeding it again.

The env is shared-db's ``books`` (two MCP servers over a ``local_postgres`` state store). To
seed it is to deploy it and write 10,000 rows through the ledger's own ``add_entry`` tool, eight
calls at a time (the env's API is how its data gets in; this env has no bulk loader). The
snapshot is that seeded deployment saved with ``agent-env env snapshot``; restoring is ``env
deploy --from-snapshot``, which starts the servers and the store from their saved images. Both
are measured until the env answers with its rows, through ``env deploy`` as a user runs it;
teardown is not counted. The bar (issue 33): a deploy from the snapshot at least 5x faster than
seeding again, i.e. at most 0.2x its time. ``--smoke`` seeds 200 rows once, to check that it
runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.bars import Bar
from bench.measure import Series

SEED = "deploy books + seed {rows} rows through add_entry (8 at a time)"
RESTORE = "deploy books from its snapshot (the rows in its store)"
BARS = (Bar(RESTORE, at_most=0.2),)
FULL_ROWS, SMOKE_ROWS = 10_000, 200
CONCURRENCY = 8


def _cli(agent_env: list[str], env: dict[str, str], *args: str) -> str:
    done = subprocess.run([*agent_env, *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"agent-env {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


async def _seed(mcp: str, token: str, rows: int) -> None:
    from agentenv_protocol.client import McpClient

    async def worker(start: int) -> None:
        async with McpClient(mcp, headers={"Authorization": f"Bearer {token}"}) as client:
            for n in range(start, rows, CONCURRENCY):
                await client.call_tool("add_entry", {"text": f"row {n}"})

    await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))


async def _count(mcp: str, token: str) -> int:
    from agentenv_protocol.client import McpClient

    async with McpClient(mcp, headers={"Authorization": f"Bearer {token}"}) as client:
        return len(json.loads((await client.call_tool("ledger_entries", {})).text)["entries"])


def _deploy(agent_env: list[str], env: dict[str, str], books: str, *extra: str) -> Any:
    return json.loads(_cli(agent_env, env, "env", "deploy", "--id", books, *extra, "--json"))


def run(*, quick: bool, workdir: Path, agent_env: list[str], smoke: bool = False) -> list[Series]:
    from agentenv_mcp_env.plugin import BUNDLES

    rows = SMOKE_ROWS if smoke else FULL_ROWS
    repeat = 1 if smoke else 2 if quick else 3
    env = {"AGENT_ENV_STATE_DIR": str(workdir / "state-env-snapshot")}
    bundle = workdir / "snapshot-books"
    shutil.rmtree(bundle, ignore_errors=True)
    shutil.copytree(BUNDLES / "shared-db", bundle)
    _cli(agent_env, env, "run", str(bundle))  # stores the envs, builds the images
    books = f"@local{bundle}/books"
    seeded: list[float] = []
    restored: list[float] = []
    snapshot = None
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            deployed = _deploy(agent_env, env, books, "--env-state-type", "local_postgres")
            asyncio.run(_seed(deployed["urls"]["mcp"], deployed["token"], rows))
            assert asyncio.run(_count(deployed["urls"]["mcp"], deployed["token"])) == rows
            seeded.append(time.perf_counter() - start)
            if snapshot is None:
                out = _cli(agent_env, env, "env", "snapshot", "--instance-id",
                           deployed["instance_id"])
                snapshot = out.split("Snapshot ID: ")[1].split()[0]
            _cli(agent_env, env, "env", "teardown", "--id", deployed["instance_id"])

            start = time.perf_counter()
            deployed = _deploy(agent_env, env, books, "--from-snapshot", snapshot)
            assert asyncio.run(_count(deployed["urls"]["mcp"], deployed["token"])) == rows
            restored.append(time.perf_counter() - start)
            _cli(agent_env, env, "env", "teardown", "--id", deployed["instance_id"])
    finally:
        _cli(agent_env, env, "env", "teardown", "--all")
        if snapshot is not None:
            _cli(agent_env, env, "env", "snapshot", "--remove", snapshot)
    name = SEED.format(rows=rows)
    return [
        Series(name, seeded, note=f"{rows} rows, {CONCURRENCY} MCP sessions"),
        Series(RESTORE, restored, baseline=name,
               note="env deploy --from-snapshot until the rows answer"),
    ]

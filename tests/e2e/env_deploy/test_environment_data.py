"""Seeding a deployed multi env as a reference user does: environment artifacts put from files,
a universe of them, ``env multi load-environment-universe-artifact`` with the token ``env
deploy`` printed; the file lands in each server's container at ``/data``, the servers answer
with the seeded data, a server that refuses its file fails the load by name (the others kept,
for a rerun), and a wrong or missing token is one line."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

MULTI = Path(__file__).resolve().parents[3] / "plugins/mcp_env/agentenv_mcp_env/bundles/multi-mcp"


async def digest(mcp_url: str, token: str) -> str:
    from agentenv_protocol.client import McpClient

    async with McpClient(mcp_url, headers={"Authorization": f"Bearer {token}"}) as client:
        return (await client.call_tool("digest")).text


def test_a_universe_seeds_each_server_of_a_deployed_multi_env(
        agent_env: Any, docker_client: Any, tmp_path: Path) -> None:
    for name in ("notes", "digest"):
        put = agent_env("env", "mcp-server", "put", "--id", f"d/{name}", "--context",
                        str(MULTI / "envs" / name))
        assert put.returncode == 0, put.stderr
    assert agent_env("env", "multi", "put", "--id", "d/office", "--mcp-server", "d/notes",
                     "--mcp-server", "d/digest", "--name", "office").returncode == 0
    (tmp_path / "notes.json").write_text('["short", "the longest note here"]')
    (tmp_path / "digest.json").write_text('{"heading": "Fri"}')
    (tmp_path / "broken.json").write_text("not json")
    for artifact_id, path, name in (("fri-notes", "notes.json", "notes"),
                                    ("fri-digest", "digest.json", "digest"),
                                    ("bad-digest", "broken.json", "digest")):
        put = agent_env("artifact", "environment", "put", str(tmp_path / path), "--id",
                        artifact_id, "--description", path, "--environment-name", name)
        assert put.returncode == 0, put.stderr
    for universe, parts in (("fri", ("fri-notes", "fri-digest")),
                            ("bad", ("fri-notes", "bad-digest"))):
        args = [a for p in parts for a in ("--environment-artifact", p)]
        assert agent_env("artifact", "environment-universe", "put", "--id", universe,
                         *args).returncode == 0
    deployed = agent_env("env", "deploy", "--id", "d/office", "--ttl-seconds", "900",
                         timeout=300)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    fields = dict(re.findall(r"^(Instance ID|Env MCP Url|Token): (\S+)", deployed.stdout, re.M))
    instance, token = fields["Instance ID"], fields["Token"]
    try:
        load = ("env", "multi", "load-environment-universe-artifact", "--env-instance-id",
                instance, "--environment-universe-artifact-id")
        missing = agent_env(*load, "fri")
        assert missing.returncode == 1
        assert missing.stderr == ("Error: the env's token is needed: pass --token (env deploy "
                                  "printed it) or set AGENT_ENV_TOKEN; it is never stored\n")
        wrong = agent_env(*load, "fri", "--token", "not-the-token")
        assert wrong.stderr == f"Error: deployment {instance}: the token is not this env's\n"

        loaded = agent_env(*load, "fri", "--token", token, timeout=120)
        assert loaded.returncode == 0, loaded.stdout + loaded.stderr
        assert "[1/2] loading digest ..." in loaded.stdout
        assert loaded.stdout.endswith(f"Loaded fri v1 into {instance}: digest, notes\n")
        labelled = {"label": f"agentenv.deployment={instance}"}
        notes = next(c for c in docker_client.containers.list(filters=labelled)
                     if c.name.endswith("-env-notes"))
        assert notes.exec_run("cat /data/notes.json").output == (
            b'["short", "the longest note here"]')
        assert asyncio.run(digest(fields["Env MCP Url"], token)) == (
            "Fri: 2 notes; the longest: the longest note here")

        # a server that cannot read its file: the load fails naming it; notes stays loaded
        bad = agent_env(*load, "bad", "--token", token, timeout=120)
        assert bad.returncode == 1
        assert bad.stderr.startswith("Error: bad v1: loading 'digest' failed (digest: server "
                                     "'digest' did not take broken.json: ")
        assert bad.stderr.endswith("; loaded 'notes', which a rerun of this load skips\n")
        again = agent_env(*load, "bad", "--token", token, timeout=120)
        assert "bad v1: resuming an unfinished load: 'notes' already loaded" in again.stdout

        # one environment artifact goes to the child of its name, through the env variable
        agent_env.env["AGENT_ENV_TOKEN"] = token
        one = agent_env("env", "multi", "load-environment-artifact", "--env-instance-id",
                        instance, "--environment-artifact-id", "fri-digest", timeout=120)
        assert one.returncode == 0, one.stderr
        assert one.stdout.endswith(f"Loaded fri-digest v1 into {instance}: digest\n")
        assert asyncio.run(digest(fields["Env MCP Url"], token)).startswith("Fri: ")
    finally:
        agent_env.env.pop("AGENT_ENV_TOKEN", None)
        down = agent_env("env", "teardown", "--id", instance, timeout=120)
        assert down.returncode == 0, down.stderr

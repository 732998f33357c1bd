"""``agent-env env deploy`` as a user runs it: register the echo env, deploy it, use it with the
official ``mcp`` client and the printed token, see it outlive the command and survive ``gc``,
tear it down with nothing left; and an expired deployment is removed by ``gc``."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

ECHO = "plugins/mcp_env/agentenv_mcp_env/bundles/echo-mcp/envs/echo"
LINE = re.compile(r"^(Instance ID|Env MCP Url|Env Gateway Url|Expires At \(UTC\)|Token): "
                  r"(\S+(?: \d\d:\d\d:\d\d)?)", re.M)


def _put_and_deploy(agent_env: Any, *extra: str) -> dict[str, str]:
    echo = Path(__file__).resolve().parents[3] / ECHO
    put = agent_env("env", "mcp-server", "put", "--id", "echo", "--context", str(echo))
    assert put.returncode == 0, put.stderr
    assert put.stdout.strip() == "env echo: v1 (new)"
    done = agent_env("env", "deploy", "--id", "echo", *extra, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Deployed!\n")
    fields = dict(LINE.findall(done.stdout))
    assert set(fields) == {"Instance ID", "Env MCP Url", "Env Gateway Url", "Expires At (UTC)",
                           "Token"}, done.stdout
    http_part, desktop_part = done.stdout.split("\nClaude Desktop ")
    config = json.loads(http_part[http_part.index("{"):])
    assert config == {"mcpServers": {"echo": {
        "type": "http", "url": fields["Env MCP Url"],
        "headers": {"Authorization": f"Bearer {fields['Token']}"}}}}
    desktop = json.loads(desktop_part[desktop_part.index("{"):desktop_part.rindex("}") + 1])
    assert desktop["mcpServers"]["echo"]["args"][:2] == ["mcp-remote", fields["Env MCP Url"]]
    assert desktop["mcpServers"]["echo"]["env"] == {"AUTH_HEADER": f"Bearer {fields['Token']}"}
    return fields


def _status(url: str, token: str | None) -> int:
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


async def _use(mcp_url: str, token: str) -> tuple[list[str], str]:
    """List the tools and call echo with the stock client, as the printed config says."""
    from mcp import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http, \
            streamable_http_client(mcp_url, http_client=http) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        tools = await session.list_tools()
        result = await session.call_tool("echo", {"text": "hi from a deployed env"})
    return [t.name for t in tools.tools], "".join(getattr(p, "text", "") for p in result.content)


def _left(docker_client: Any, sandbox_id: str) -> list[str]:
    label = {"label": f"agentenv.sandbox={sandbox_id}"}
    return ([c.name for c in docker_client.containers.list(all=True, filters=label)]
            + [n.name for n in docker_client.networks.list(filters=label)])


def test_deploy_use_it_with_the_token_and_tear_it_down(agent_env: Any,
                                                       docker_client: Any) -> None:
    fields = _put_and_deploy(agent_env, "--ttl-seconds", "900", "--gateway-mode", "consistent")
    instance, mcp_url, token = fields["Instance ID"], fields["Env MCP Url"], fields["Token"]
    info = json.loads(agent_env("env", "get-instance", "--id", instance).stdout)
    sandbox_id = info["sandbox_id"]
    try:
        assert mcp_url == fields["Env Gateway Url"] + "/mcp"
        assert token not in json.dumps(info)  # the token is never stored
        listed = agent_env("env", "list").stdout
        assert instance in listed and listed.rstrip().endswith("live")
        # the command has exited: the env is still up and answers only with the token
        tools, echoed = asyncio.run(_use(mcp_url, token))
        assert "echo" in tools and echoed == "hi from a deployed env"
        assert _status(mcp_url, None) == 401
        assert _status(mcp_url, token + "x") == 401
        # --gateway-mode reached the gateway: it runs tool calls one at a time
        state = urllib.request.Request(fields["Env Gateway Url"] + "/state",
                                       headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(state, timeout=10) as response:
            assert json.loads(response.read())["mode"] == "consistent"
        # gc keeps a live deployment although the process that made it is gone
        gc = agent_env("gc", "--yes", "--label", f"agentenv.sandbox={sandbox_id}")
        assert gc.returncode == 0, gc.stderr
        assert f"deployed env {instance}, until" in gc.stdout
        assert len(_left(docker_client, sandbox_id)) >= 4  # env, gateway, two networks
        labelled = {"label": f"agentenv.deployment={instance}"}
        # env, gateway and the sandbox's DNS answerer
        assert len(docker_client.containers.list(filters=labelled)) == 3
        down = agent_env("env", "teardown", "--id", instance, timeout=120)
        assert down.returncode == 0 and down.stdout.strip() == f"Tore down {instance}."
        assert _left(docker_client, sandbox_id) == []
        again = agent_env("env", "teardown", "--id", instance)
        assert again.returncode == 0 and "nothing to do" in again.stdout
        assert agent_env("env", "list").stdout.startswith("No envs are deployed")
    finally:
        agent_env("env", "teardown", "--all", timeout=120)


def test_validate_deploys_checks_and_leaves_nothing(agent_env: Any,
                                                    docker_client: Any) -> None:
    echo = Path(__file__).resolve().parents[3] / ECHO
    # put --validate: stores it, then runs env mcp-server validate on that version
    checked = agent_env("env", "mcp-server", "put", "--id", "echo", "--context", str(echo),
                        "--validate", timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("env echo: v1 (new)\n")
    assert "validate env echo v1: passed (card: 1, core_protocol: 1)" in checked.stdout
    assert "Tore down 1 sandbox." in checked.stdout
    instance = re.search(r"instance (\S+)", checked.stdout)
    assert instance is not None
    label = {"label": f"agentenv.run={instance.group(1)}"}
    assert docker_client.containers.list(all=True, filters=label) == []
    assert docker_client.networks.list(filters=label) == []


def test_multi_put_names_stored_children_and_validate_checks_them_together(
        agent_env: Any, docker_client: Any) -> None:
    root = Path(__file__).resolve().parents[3]
    multi = root / "plugins/mcp_env/agentenv_mcp_env/bundles/multi-mcp/envs"
    for name in ("notes", "digest"):
        put = agent_env("env", "mcp-server", "put", "--id", f"t/{name}", "--context",
                        str(multi / name))
        assert put.returncode == 0, put.stderr
    wrong = agent_env("env", "multi", "put", "--id", "t/office", "--mcp-server", "t/nope")
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == ("Error: --mcp-server t/nope: no env 't/nope' is stored "
                                    "(store it with agent-env env mcp-server put)")
    checked = agent_env("env", "multi", "put", "--id", "t/office", "--mcp-server", "t/notes",
                        "--mcp-server", "t/digest", "--name", "office", "--validate",
                        timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("env t/office: v1 (new)\n")
    assert "validate env t/office v1: passed (card: 1, core_protocol: 1)" in checked.stdout
    nested = agent_env("env", "multi", "put", "--id", "t/nested", "--mcp-server", "t/office")
    assert nested.stderr.strip() == ("Error: --mcp-server t/office: an env of type 'multi', "
                                     "not mcp_server")
    instance = re.search(r"instance (\S+)", checked.stdout)
    assert instance is not None
    label = {"label": f"agentenv.run={instance.group(1)}"}
    assert docker_client.containers.list(all=True, filters=label) == []


def test_deploy_behind_a_stored_gateway(agent_env: Any, docker_client: Any) -> None:
    """``env gateway put`` stores the gateway this installation builds; ``env deploy
    --gateway`` deploys behind it; a gateway that is not stored is one line, before anything
    starts."""
    put = agent_env("env", "gateway", "put", "--id", "gw")
    assert put.returncode == 0, put.stderr
    assert put.stdout.strip() == "env gw: v1 (new)"
    fields = _put_and_deploy(agent_env, "--gateway", "gw")
    instance = fields["Instance ID"]
    try:
        labelled = {"label": f"agentenv.deployment={instance}"}
        images = sorted(tag for c in docker_client.containers.list(filters=labelled)
                        for tag in c.image.tags)
        assert any(tag.startswith("agentenv/gw:") for tag in images), images
        tools, echoed = asyncio.run(_use(fields["Env MCP Url"], fields["Token"]))
        assert tools == ["echo"] and echoed == "hi from a deployed env"
        wrong = agent_env("env", "deploy", "--id", "echo", "--gateway", "nope")
        assert wrong.returncode == 1
        assert wrong.stderr.strip() == ("Error: --gateway nope: no env 'nope' is stored (store "
                                        "one with agent-env env gateway put)")
    finally:
        agent_env("env", "teardown", "--all", timeout=120)


def test_an_expired_deployment_is_removed_by_gc(agent_env: Any, docker_client: Any) -> None:
    fields = _put_and_deploy(agent_env, "--ttl-seconds", "1")
    instance = fields["Instance ID"]
    sandbox_id = json.loads(agent_env("env", "get-instance", "--id", instance).stdout)[
        "sandbox_id"]
    try:
        expires = dt.datetime.fromisoformat(fields["Expires At (UTC)"] + "+00:00")
        # a one-second TTL has nearly always passed once the deploy returns; wait out the rest
        deadline = expires.timestamp() + 2
        while time.time() < deadline and "expired" not in agent_env("env", "list").stdout:
            time.sleep(0.2)
        assert "expired (agent-env gc removes it)" in agent_env("env", "list").stdout
        assert _left(docker_client, sandbox_id)
        gc = agent_env("gc", "--yes", "--label", f"agentenv.sandbox={sandbox_id}", timeout=120)
        assert gc.returncode == 0, gc.stdout + gc.stderr
        assert f"deployed env {instance} expired at" in gc.stdout
        assert _left(docker_client, sandbox_id) == []
        assert agent_env("env", "list").stdout.startswith("No envs are deployed")
    finally:
        agent_env("env", "teardown", "--all", timeout=120)


def test_options_it_cannot_honour_are_one_line_before_anything_starts(
        agent_env: Any, docker_client: Any) -> None:
    echo = Path(__file__).resolve().parents[3] / ECHO
    assert agent_env("env", "mcp-server", "put", "--id", "echo", "--context",
                     str(echo)).returncode == 0
    for option, value, says in (
            ("--disk-size-gb", "20", "--disk-size-gb 20: no sandbox provider here sizes"),
            ("--env-state-type", "postgres", "--env-state-type 'postgres': no installed env "
                                              "type backs such an env state (installed: "
                                              "local_postgres)"),
            ("--env-state-instance-id", "nope", "--env-state-instance-id 'nope' is not an env "
                                                "state instance id (esi-...")):
        done = agent_env("env", "deploy", "--id", "echo", option, value)
        assert done.returncode == 1 and done.stderr.startswith(f"Error: {says}"), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert agent_env("env", "list").stdout.startswith("No envs are deployed")


def test_a_failed_deploy_is_one_line_and_leaves_nothing(agent_env: Any,
                                                        docker_client: Any) -> None:
    assert agent_env("env", "mcp-server", "put", "--id", "broken", "--image-ref",
                     "agentenv-test/no-such-image:1", "--environment-name", "b").returncode == 0
    failed = agent_env("env", "deploy", "--id", "broken", timeout=300)
    assert failed.returncode != 0
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: deploying env 'broken' v1 failed: ") and \
        "no-such-image" in last, failed.stderr
    assert "Traceback" not in failed.stderr
    assert agent_env("env", "list").stdout.startswith("No envs are deployed")
    label = {"label": "agentenv.env=broken"}
    assert docker_client.containers.list(all=True, filters=label) == []
    # its sandbox's networks carry agentenv.deployment=broken-<8 random>
    ours = [n.name for n in docker_client.networks.list(filters={"label": "agentenv.deployment"})
            if n.attrs.get("Labels", {}).get("agentenv.deployment", "").startswith("broken-")]
    assert ours == []

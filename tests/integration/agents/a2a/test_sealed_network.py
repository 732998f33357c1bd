"""Agents are sealed by default: on the real engine, a deployed agent's container reaches its env's
gateway and the model gateway, and nothing else: not the env servers behind the gateway, not
the package registries the host reaches, not another run's containers. ``network_policy =
"open"`` gives it a route out, and the record says which it got; ``allowlist`` keeps the seal
and adds the hosts and CIDRs it lists, through an egress proxy its HTTPS_PROXY names.

Reachability is probed from inside the agent container with a plain TCP connect (by address
where a name would only add a DNS timeout), so each check is what the agent's own code could do.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from agent_env.sandbox.base import ContainerSpec, SandboxSpec
from agent_env.tasks.context import TaskContext
from agent_env.tasks.sandboxes import open_provider
from agent_env.tasks.step_types.env_steps import DeployEnv
from agent_env.tasks.steps import PreflightView, StepError, structure_step
from agentenv_agents.model_steps import ScriptedModel
from agentenv_agents.steps import DeployAgent, PromptAgent

pytestmark = pytest.mark.docker
TEXT = "agents smoke 7431"  # what the smoke bundle's scripted model expects
PROBE = """
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    socket.create_connection((host, port), timeout=4).close()
    print("reached")
except OSError as exc:
    print("refused:", type(exc).__name__, exc)
"""

FETCH = """
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=20) as reply:
        print("status", reply.status)
except Exception as exc:
    print("failed:", exc)
"""


def fetch(container: Any, url: str) -> str:
    """GET ``url`` from inside ``container`` with urllib, which honours the proxy variables."""
    out = container.exec_run(["python", "-c", FETCH, url]).output.decode().strip()
    return out.splitlines()[-1] if out else "no output"


def registry_address() -> str:
    """The npm registry as the host resolves it (agent images are built from it)."""
    return socket.gethostbyname("registry.npmjs.org")


def probe(container: Any, host: str, port: int) -> str:
    out = container.exec_run(["python", "-c", PROBE, host, str(port)]).output.decode().strip()
    return out.splitlines()[-1] if out else "no output"


def one(client: Any, run_id: str, role: str) -> Any:
    (found,) = client.containers.list(filters={"label": [f"agentenv.run={run_id}",
                                                         f"agentenv.role={role}"]})
    return found


async def deploy(ctx: TaskContext, ids: dict[str, str], **agent: Any) -> None:
    await DeployEnv(id="deploy", env_id=ids["echo"], sandbox_type="docker").run(ctx)
    await ScriptedModel(id="model", script_artifact_id=ids["echo_script"]).run(ctx)
    await DeployAgent(id="agent", a2a_agent_id="model-agent", env_ids=[ids["echo"]],
                      **agent).run(ctx)


async def test_a_sealed_agent_reaches_its_gateways_and_nothing_else(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    # another run's sandbox, with a container that publishes a port (as a gateway does)
    other = await open_provider("docker").create(SandboxSpec(
        name="other-run", labels={"agentenv.run": f"{run_id}-other"}))
    try:
        await other.run_container(ContainerSpec(
            name="web", image="python:3.11-slim", publish=(8080,),
            command=("python", "-m", "http.server", "8080")))
        other_web = docker_client.containers.get(other.container_name("web"))
        other_ip = next(iter(other_web.attrs["NetworkSettings"]["Networks"].values()))[
            "IPAddress"]

        await deploy(ctx, ids)
        assert ctx.outputs["agent"]["network_policy"] == "sealed"
        agent = one(docker_client, run_id, "agent")
        sandbox = ctx.outputs["agent"]["sandbox"]["id"]
        assert set(agent.attrs["NetworkSettings"]["Networks"]) == {f"{sandbox}-sealed"}
        # its tools and its model
        assert probe(agent, "gateway", 18765) == "reached"
        assert probe(agent, "model-gateway", 4000) == "reached"
        # not the env server behind the gateway, not the registries, not another run
        server = docker_client.containers.get(f"{sandbox}-env")  # the echo env's server
        server_ip = next(iter(server.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
        assert probe(agent, server_ip, 8000).startswith("refused")
        assert probe(agent, registry_address(), 443).startswith("refused")
        assert probe(agent, other_ip, 8080).startswith("refused")
        # the agent's front, on the edge network, reaches the registry: the refusal above is
        # the seal's doing, not this machine's
        front = one(docker_client, run_id, "agent-front")
        assert probe(front, registry_address(), 443) == "reached"

        # and the agent works through the gateways alone
        await PromptAgent(id="ask", prompt=f"Call the echo tool with the text '{TEXT}'.",
                          model="scripted:echo_script", timeout_seconds=60).run(ctx)
        assert ctx.outputs["ask"]["error_type"] is None
        assert ctx.outputs["ask"]["tool_call_count"] == 1
    finally:
        await other.terminate()
    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


async def test_an_open_agent_has_a_route_out_and_the_record_says_so(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
) -> None:
    ctx, ids = task
    await deploy(ctx, ids, network_policy="open")
    assert ctx.outputs["agent"]["network_policy"] == "open"
    agent = one(docker_client, run_id, "agent")
    assert not any(n.endswith("-sealed") for n in agent.attrs["NetworkSettings"]["Networks"])
    assert probe(agent, registry_address(), 443) == "reached"
    assert probe(agent, "gateway", 18765) == "reached"


async def test_an_allowlisted_agent_reaches_the_listed_hosts_through_its_proxy_alone(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["echo"], sandbox_type="docker").run(ctx)
    await ScriptedModel(id="model", script_artifact_id=ids["echo_script"]).run(ctx)
    sandbox = ctx.env(ids["echo"]).sandbox.id
    # the env sandbox's edge network, where the model gateway will be: listed by CIDR
    edge = docker_client.networks.get(f"{sandbox}-edge")
    subnet = edge.attrs["IPAM"]["Config"][0]["Subnet"]
    await DeployAgent(id="agent", a2a_agent_id="model-agent", env_ids=[ids["echo"]],
                      network_policy="allowlist", allow_hosts=["registry.npmjs.org"],
                      allow_cidrs=[subnet]).run(ctx)
    assert ctx.outputs["agent"]["network_policy"] == "allowlist"
    assert ctx.outputs["agent"]["allowed"] == ["registry.npmjs.org", subnet]
    agent = one(docker_client, run_id, "agent")
    assert set(agent.attrs["NetworkSettings"]["Networks"]) == {f"{sandbox}-sealed"}
    # a listed host by name, over HTTPS (CONNECT through the proxy)
    assert fetch(agent, "https://registry.npmjs.org/-/ping") == "status 200"
    # a host it does not list: the proxy refuses, naming the list
    refused = fetch(agent, "https://pypi.org/simple/")
    assert refused.startswith("failed:") and "403" in refused
    # an address in the listed CIDR: the model gateway by its edge address
    gateway = one(docker_client, run_id, "model-gateway")
    address = gateway.attrs["NetworkSettings"]["Networks"][f"{sandbox}-edge"]["IPAddress"]
    assert fetch(agent, f"http://{address}:4000/healthz") == "status 200"
    # still sealed: no route out but the proxy
    assert probe(agent, registry_address(), 443).startswith("refused")
    # its gateways directly (NO_PROXY), and the agent works through them
    assert probe(agent, "gateway", 18765) == "reached"
    await PromptAgent(id="ask", prompt=f"Call the echo tool with the text '{TEXT}'.",
                      model="scripted:echo_script", timeout_seconds=60).run(ctx)
    assert ctx.outputs["ask"]["error_type"] is None
    assert ctx.outputs["ask"]["tool_call_count"] == 1
    # the proxy is the agent's own: the token in its HTTPS_PROXY is a registered secret
    proxy = next(v for v in agent.attrs["Config"]["Env"] if v.startswith("HTTPS_PROXY="))
    token = proxy.split(":", 2)[2].split("@", 1)[0]
    assert ctx.strip_secrets(f"x {token} y") == "x **** y"
    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


def test_an_unknown_network_policy_is_refused_before_anything_runs() -> None:
    view = PreflightView(step_ids=frozenset({"agent"}))
    step = structure_step(DeployAgent, {"id": "agent", "network_policy": "closed"})
    assert step.check(view) == [
        "network_policy must be one of sealed, open, allowlist, not 'closed'"]
    assert structure_step(DeployAgent, {"id": "agent", "network_policy": "open"}).check(
        view) == []


async def test_a_sandbox_that_cannot_seal_refuses_a_sealed_agent(
    task: tuple[TaskContext, dict[str, str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx, ids = task
    from agentenv_docker_env.sandbox import DockerSandbox

    monkeypatch.setattr(DockerSandbox, "agent_isolation", lambda self: "no seal here (test)")
    with pytest.raises(StepError, match=r"agent 'agent' cannot be sealed: no seal here \(test\); "
                                        r'set network_policy = "open"'):
        await deploy(ctx, ids)

"""The ``mcp_server`` env type on the real engine, through the steps a task file names.

Envs come from ``bundles/testenvs`` (a counter with a data-plane reset, and an env that crashes
at start), stored through the same ledger ``agent-env run`` uses, then deployed by ``deploy_env``
into a docker sandbox labelled with the test's own ``agentenv.run`` id.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent_env.env_types import env_provider_chain
from agent_env.tasks.context import TaskContext
from agent_env.tasks.step_types.env_steps import DeployEnv
from agent_env.tasks.steps import InfraError, StepError
from agentenv_mcp_env.deployment import GatewayDeployment
from agentenv_mcp_env.steps import ResetEnv, VerifyEnvCard, VerifyEnvCoreProtocol

pytestmark = pytest.mark.docker
HERE = Path(__file__).parent


def store_test_envs() -> tuple[dict[str, str], Any]:
    """Store ``bundles/testenvs``' envs; returns name -> id and the run's artifact source."""
    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.runtime import current

    bundle, problems = parse_bundle(HERE / "bundles" / "testenvs", "@test/testenvs")
    assert problems == []
    ledger = Ledger(current().versioned_store, current().object_store)
    for env in bundle.envs:
        ledger.write_files_entity("envs", env)
    artifacts = StoredArtifacts(current().versioned_store, current().object_store)
    return {e.name: e.id for e in bundle.envs}, artifacts


@pytest.fixture
async def task(run_id: str) -> AsyncIterator[tuple[TaskContext, dict[str, str]]]:
    ids, artifacts = store_test_envs()
    ctx = TaskContext(task_id="@test/testenvs/t", instance_id=run_id, artifacts=artifacts)
    yield ctx, ids
    report = await ctx.teardown.run()
    assert report.failed == ()


def serve_script(ctx: TaskContext, name: str) -> None:
    """Every artifact the run loads is ``bundles/<name>`` as ``verify.py`` (a test double for
    the stored check artifact)."""
    from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile

    script = (HERE / "bundles" / name).read_bytes()

    async def artifact(artifact_id: str, version: int | None = None) -> ArtifactContent:
        return ArtifactContent(artifact_id, 1, "file", (ArtifactFile("verify.py", script),))

    ctx.artifact = artifact  # type: ignore[method-assign]


async def _status(url: str, headers: dict[str, str] | None = None) -> int:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers or {}) as resp:
        return resp.status


async def test_deploy_serves_only_with_the_token_and_passes_protocol_checks(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["counter"], sandbox_type="docker",
                    ttl_seconds=600).run(ctx)
    env = ctx.env(ids["counter"])
    assert isinstance(env, GatewayDeployment)
    assert re.fullmatch(re.escape(ids["counter"]) + r"-[a-z0-9]{8}", env.instance_id)
    created = datetime.fromisoformat(env.created_at)
    assert (datetime.fromisoformat(env.expires_at) - created).total_seconds() == 600
    assert env.tools == ("bump",)
    assert env.url.startswith("http://127.0.0.1:")

    # The token is the only way in: no header, a wrong bearer and a wrong path are all 401.
    assert await _status(f"{env.url}/ready") == 401
    assert await _status(f"{env.url}/mcp") == 401
    assert await _status(f"{env.url}/ready", {"Authorization": "Bearer nope"}) == 401
    assert await _status(f"{env.url}/t/nope/ready") == 401
    assert await _status(f"{env.url}/ready", env.headers) == 200
    assert await _status(f"{env.capability_url}/ready") == 200

    from agentenv_protocol.client import McpClient

    async with McpClient(env.mcp_url) as client:  # a capability URL needs no headers
        assert (await client.call_tool("bump")).text == "1"
        assert (await client.call_tool("bump")).text == "2"
        await ResetEnv(id="reset", env_id=ids["counter"]).run(ctx)
        assert (await client.call_tool("bump")).text == "1"

    await VerifyEnvCard(id="card", env_id=ids["counter"]).run(ctx)
    await VerifyEnvCoreProtocol(id="core", env_id=ids["counter"]).run(ctx)
    for verifier in ("card", "core"):
        verification = ctx.verifications[verifier]
        failed = [r.to_json() for r in verification.results if not r.result]
        assert verification.score == 1.0, failed
    assert len(ctx.verifications["core"].results) >= 5

    # Only the gateway is published; the env (and the sandbox's DNS answerer) sit on the
    # private network alone.
    containers = docker_client.containers.list(filters={"label": f"agentenv.run={run_id}"})
    published = {c.labels.get("agentenv.container"): [
        p for p, b in (c.attrs["NetworkSettings"]["Ports"] or {}).items() if b]
        for c in containers}
    assert published == {"dns": [], "env": [], "gateway": ["18765/tcp"]}

    # The token never reaches a record.
    assert env.token not in json.dumps(ctx.snapshot())
    assert ctx.snapshot()["envs"][ids["counter"]]["instance_id"] == env.instance_id

    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


async def test_an_env_built_with_create_fastmcp_app_on_mcp_1_passes_the_protocol_checks(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
) -> None:
    """``envs/notes`` is written the reference's way (``create_fastmcp_app``, a ToolContext
    parameter) and pins what its images pin (``mcp>=1.25,<2``), with the protocol unpinned,
    so the build gives it this repository's: behind the gateway it serves as ours does."""
    from agentenv_protocol.client import McpClient

    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["notes"], sandbox_type="docker",
                    ttl_seconds=600).run(ctx)
    env = ctx.env(ids["notes"])
    assert env.tools == ("add_note", "whoami")
    async with McpClient(env.mcp_url) as client:
        assert (await client.call_tool("add_note", {"text": "hi"})).text \
            == "default kept 'hi' (1 notes)"
        assert (await client.call_tool("whoami")).text == "default"
        await ResetEnv(id="reset", env_id=ids["notes"]).run(ctx)
        assert (await client.call_tool("add_note", {"text": "again"})).text \
            == "default kept 'again' (1 notes)"
    await VerifyEnvCard(id="card", env_id=ids["notes"]).run(ctx)
    await VerifyEnvCoreProtocol(id="core", env_id=ids["notes"]).run(ctx)
    for verifier in ("card", "core"):
        verification = ctx.verifications[verifier]
        assert verification.score == 1.0, [r.to_json() for r in verification.results
                                            if not r.result]

    [container] = docker_client.containers.list(filters={
        "label": [f"agentenv.run={run_id}", "agentenv.container=env"]})
    probe = ("from importlib.metadata import version; import agentenv_protocol.mounting as m; "
             "print(version('mcp'), version('agentenv-framework-protocol'))")
    code, out = container.exec_run(["python", "-c", probe])
    assert code == 0, out
    mcp_version, protocol_version = out.decode().split()
    assert mcp_version.startswith("1.")
    from importlib.metadata import version

    assert protocol_version == version("agentenv-framework-protocol")  # ours, not the PyPI one


async def test_env_that_crashes_fails_at_once_with_its_exit_code_and_logs(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    step = DeployEnv(id="deploy", env_id=ids["crash"], sandbox_type="docker",
                     ready_timeout_seconds=60)
    # Build the images first, so the time measured below is the readiness wait alone.
    from agent_env.env_types import load_env_source
    from agent_env.sandbox.base import SandboxSpec
    from agentenv_mcp_env.deployment import McpServerEnv

    warm = await ctx.create_sandbox(SandboxSpec(name="warm", mode="vm"), "docker")
    await McpServerEnv(load_env_source(ctx.artifacts, ids["crash"]), ctx.artifacts) \
        .build_images(warm)
    assert await ctx.tear_down_sandbox("warm")

    started = time.monotonic()
    with pytest.raises(StepError) as failure:
        await step.run(ctx)
    elapsed = time.monotonic() - started
    message = str(failure.value)
    # Issue 31, class 12: an env that exits at start is noticed at once (it used to wait the
    # whole ready timeout and then say only "not ready")
    assert elapsed < 5, elapsed
    assert "env crash stopped before it was ready (container env: exited with code" in message
    assert "crash env booting" in message  # the env container's own output...
    assert "boom: DATABASE_URL is not set" in message  # ...down to its last line
    assert "last log lines of the gateway container" in message
    # A failed deploy takes down what it made, before the run's teardown even starts.
    assert ctx.sandboxes == {}
    assert leftovers() == []
    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


def test_local_means_docker_for_env_deploys(run_id: str) -> None:
    ctx = TaskContext(task_id="t", instance_id=run_id, artifacts=None)  # type: ignore[arg-type]
    assert env_provider_chain(ctx, "local") == ["docker"]
    assert env_provider_chain(ctx, "local,docker") == ["docker"]
    assert env_provider_chain(ctx, "tensorlake,local") == ["tensorlake", "docker"]
    ctx.sandbox_chain = ["local"]  # --sandbox local
    assert env_provider_chain(ctx, "docker") == ["docker"]


async def test_with_envs_serves_both_behind_one_gateway(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["counter"], with_envs=[ids["greeter"]],
                    sandbox_type="docker").run(ctx)
    env = ctx.env(ids["counter"])
    assert ctx.env(ids["greeter"]) is env  # either id names the deployment
    assert sorted(env.tools) == ["bump", "greet"]
    assert [s.container for s in env.servers] == ["env", "env-greeter"]

    from agentenv_protocol.client import McpClient

    async with McpClient(env.mcp_url) as client:
        assert (await client.call_tool("greet", {"name": "ada"})).text == "hello ada"
        assert (await client.call_tool("bump")).text == "1"
    containers = docker_client.containers.list(filters={"label": f"agentenv.run={run_id}"})
    assert sorted(c.labels["agentenv.container"] for c in containers) == [
        "dns", "env", "env-greeter", "gateway"]
    assert ctx.outputs["deploy"]["images"].keys() == {ids["counter"], ids["greeter"]}
    assert (await ctx.teardown.run()).failed == ()
    assert leftovers() == []


async def test_a_tool_name_clash_refuses_the_deploy_and_leaves_nothing(
    task: tuple[TaskContext, dict[str, str]], leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    started = time.monotonic()
    with pytest.raises(StepError) as failure:
        await DeployEnv(id="deploy", env_id=ids["counter"], with_envs=[ids["bumper"]],
                        sandbox_type="docker", ready_timeout_seconds=60).run(ctx)
    message = str(failure.value)
    assert "refused: tool-name clash ('bump' served by counter, bumper)" in message, message
    assert time.monotonic() - started < 60  # refused at once, not at the timeout
    assert ctx.sandboxes == {} and ctx.envs == {}
    assert leftovers() == []


async def test_a_multi_env_deploys_its_children_behind_one_gateway(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]],
) -> None:
    """``envs/pair`` (``type = "multi"``) is counter and greeter as one env: one gateway, one
    token, one namespace, a card naming both; only the gateway is published."""
    from agentenv_protocol.client import McpClient, fetch_card

    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["pair"], sandbox_type="docker").run(ctx)
    env = ctx.env(ids["pair"])
    assert env.environment_name == "pair"
    assert sorted(env.tools) == ["bump", "greet"]
    assert [s.container for s in env.servers] == ["env-counter", "env-greeter"]
    async with McpClient(env.mcp_url) as client:
        assert (await client.call_tool("greet", {"name": "ada"})).text == "hello ada"
        assert (await client.call_tool("bump")).text == "1"
    card = await fetch_card(env.capability_url)
    assert card.name == "pair"
    assert sorted(c.name for c in card.children_environments or []) == ["counter", "greeter"]
    containers = docker_client.containers.list(filters={"label": f"agentenv.run={run_id}"})
    published = {c.labels.get("agentenv.container"): [
        p for p, b in (c.attrs["NetworkSettings"]["Ports"] or {}).items() if b]
        for c in containers}
    assert published == {"dns": [], "env-counter": [], "env-greeter": [], "gateway": [
        "18765/tcp"]}
    assert ctx.outputs["deploy"]["images"].keys() == {ids["counter"], ids["greeter"]}
    assert (await ctx.teardown.run()).failed == ()
    assert leftovers() == []


async def test_a_multi_env_whose_children_clash_is_refused_and_leaves_nothing(
    task: tuple[TaskContext, dict[str, str]], leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    with pytest.raises(StepError, match=r"refused: tool-name clash \('bump' served by "
                                        r"counter, bumper\)"):
        await DeployEnv(id="deploy", env_id=ids["clashing"], sandbox_type="docker",
                        ready_timeout_seconds=60).run(ctx)
    assert ctx.sandboxes == {} and ctx.envs == {}
    assert leftovers() == []


async def test_a_run_can_deploy_behind_a_stored_gateway_of_its_own(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, tmp_path: Path,
    leftovers: Callable[[], list[str]],
) -> None:
    """``--gateway-env-id``: a gateway_server env (here the built-in context with a label of
    its own) is built and stands in front of the env; a non-gateway env is refused."""
    from agent_env.api import RunChoices, put_env
    from agentenv_mcp_env.gateway_image import write_gateway_context
    from agentenv_protocol.client import McpClient

    ctx, ids = task
    context = write_gateway_context(tmp_path / "gateway")
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + 'LABEL test.gateway="ours"\n')
    put_env("t/gateway", "gateway_server", context, None, None, "gateway")
    ctx.choices = RunChoices(gateway_env="t/gateway")
    await DeployEnv(id="deploy", env_id=ids["counter"], sandbox_type="docker").run(ctx)
    env = ctx.env(ids["counter"])
    assert docker_client.images.get(env.gateway_image).labels.get("test.gateway") == "ours"
    async with McpClient(env.mcp_url) as client:
        assert (await client.call_tool("bump")).text == "1"
    assert (await ctx.teardown.run()).failed == ()

    ctx.choices = RunChoices(gateway_env=ids["counter"])  # not a gateway env
    with pytest.raises(StepError, match="an env of type 'mcp_server', not gateway_server"):
        await DeployEnv(id="again", env_id=ids["greeter"], sandbox_type="docker").run(ctx)
    assert "env-greeter" not in ctx.sandboxes  # the failed deploy took its sandbox down
    assert leftovers() == []


async def test_env_container_killed_mid_run_fails_clearly_and_teardown_cleans_up(
    task: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]], tmp_path: Path,
) -> None:
    from agentenv_mcp_env.steps import EnvOutcomeVerifier

    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["counter"], sandbox_type="docker").run(ctx)
    serve_script(ctx, "bump_check.py")
    verifier = EnvOutcomeVerifier(id="check", env_id=ids["counter"], file_artifact_id="check")
    await verifier.run(ctx)  # healthy: passes
    assert ctx.verifications["check"].score == 1.0

    (env_container,) = docker_client.containers.list(filters={
        "label": [f"agentenv.run={run_id}", "agentenv.container=env"]})
    env_container.kill()
    ctx.forget_step("check")
    with pytest.raises(InfraError) as failure:  # the run is an error, not the agent's failure
        await verifier.run(ctx)
    message = str(failure.value)
    assert "env counter went down during the run" in message, message
    assert "env server counter does not answer" in message, message
    assert "container env: exited with code 137" in message, message
    assert "verify.py reported: bumps:" in message, message

    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


async def _two_calls_at_once(ctx: TaskContext, env_id: str) -> list[str]:
    import asyncio

    from agentenv_protocol.client import McpClient

    env = ctx.env(env_id)
    async with McpClient(env.mcp_url) as first, McpClient(env.mcp_url) as second:
        results = await asyncio.gather(first.call_tool("slow_bump"),
                                       second.call_tool("slow_bump"))
    return sorted(r.text for r in results)


async def test_gateway_mode_consistent_runs_tool_calls_one_at_a_time(
    task: tuple[TaskContext, dict[str, str]],
) -> None:
    """A read-wait-write tool called twice at once: side by side (``performance``, the default)
    both read 0; one at a time (``consistent``) the second sees the first's write."""
    ctx, ids = task
    await DeployEnv(id="fast", env_id=ids["slowcounter"], sandbox_type="docker").run(ctx)
    assert await _two_calls_at_once(ctx, ids["slowcounter"]) == ["1", "1"]
    await ctx.tear_down_sandbox("env-slowcounter")

    await DeployEnv(id="safe", env_id=ids["slowcounter"], sandbox_type="docker",
                    gateway_mode="consistent", metadata={"owner": "qa"}).run(ctx)
    assert await _two_calls_at_once(ctx, ids["slowcounter"]) == ["1", "2"]
    assert ctx.outputs["safe"]["metadata"] == {"owner": "qa"}
    # env_step_id filters: the deploy step that made this deployment passes, another fails
    from agent_env.tasks.step_types.artifact_steps import LoadArtifact

    LoadArtifact(id="ok", env_id=ids["slowcounter"], env_step_id="safe",
                 artifacts=["x"])._check_env_step(ctx)
    with pytest.raises(StepError, match="env_step_id 'fast' names no deployment of env"):
        LoadArtifact(id="bad", env_id=ids["slowcounter"], env_step_id="fast",
                     artifacts=["x"])._check_env_step(ctx)


async def test_a_verify_script_that_takes_run_gets_the_graded_conversation(
    task: tuple[TaskContext, dict[str, str]],
) -> None:
    """``verify(mcp_url, run)``: the turns of ``prompt_id``'s conversation, both sides."""
    from agentenv_mcp_env.steps import EnvOutcomeVerifier

    ctx, ids = task
    await DeployEnv(id="deploy", env_id=ids["counter"], sandbox_type="docker").run(ctx)
    serve_script(ctx, "run_check.py")
    # what a two-turn prompt_agent step records (written here: no agent runs in this test)
    ctx.outputs["ask"] = {"prompt_id": "ask", "agent_name": "agent", "prompt": "bump it",
                          "response": "the count is 1", "conversation": [
                              {"role": "user", "text": "bump it"},
                              {"role": "agent", "text": "bumped"},
                              {"role": "user", "text": "what is the count now?"},
                              {"role": "agent", "text": "the count is 1"}]}
    await EnvOutcomeVerifier(id="check", env_id=ids["counter"], file_artifact_id="check",
                             prompt_id="ask").run(ctx)
    results = {r.criterion.get("id"): r.result for r in ctx.verifications["check"].results}
    assert results == {"turns": True, "said-the-count": True, "no-firings": True}
    with pytest.raises(StepError, match="no reply to prompt 'nope' is recorded"):
        await EnvOutcomeVerifier(id="check2", env_id=ids["counter"], file_artifact_id="check",
                                 prompt_id="nope").run(ctx)

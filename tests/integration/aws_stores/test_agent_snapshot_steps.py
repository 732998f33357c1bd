"""The snapshot steps on real parts: ``snapshot_agent_state`` saves an SDK agent's conversation
and workspace into moto's S3 (the run's object store, by config) through the a2a agent type;
``deploy_agent``'s ``agent_snapshot_*`` loads it, or a stored files artifact, into another agent
that carries on. The agents are real SDK servers on loopback; only the container deploy is
stood in for (``deployed_as``), since the snapshot work starts once an agent answers."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from scribe_agent import ScribeAgent, send

from agent_env.api import StepError
from agent_env.runtime import Runtime, use
from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile, MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agentenv_agents.a2a_type import A2aAgent, ModelGatewayHandle
from agentenv_agents.steps import DeployAgent, SnapshotAgentState
from agentenv_protocol.agent import create_app
from agentenv_protocol.testing import RunningServer, serve_app


@pytest.fixture
def s3_runtime(aws: dict[str, Any], s3_store: Any) -> Iterator[Runtime]:
    """A runtime whose object store is ``s3_store``'s bucket on moto (as a user configures)."""
    runtime = Runtime()
    runtime.configure(stores={"object": {
        "backend": "s3", "bucket": s3_store.bucket, "create_bucket": True,
        "endpoint_url": aws["endpoint_url"],
        "region": aws["region"], "access_key_id": aws["access_key_id"],
        "secret_access_key": aws["secret_access_key"]}})
    with use(runtime):
        yield runtime
    runtime.close()


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[RunningServer, RunningServer]]:
    async with serve_app(create_app(ScribeAgent(tmp_path / "a"))) as first, \
            serve_app(create_app(ScribeAgent(tmp_path / "b"))) as second:
        yield first, second


def task_context(*artifacts: ArtifactContent) -> TaskContext:
    return TaskContext(task_id="@test/snap/t", instance_id=f"run-{uuid.uuid4().hex[:8]}",
                       artifacts=MemoryArtifacts(artifacts))


async def a2a_agent(name: str, server: RunningServer, ctx: TaskContext, *,
                    policy: str = "open", card: dict[str, Any] | None = None) -> A2aAgent:
    """The a2a type's agent object for an SDK server already running (no container; its model
    gateway handle is never called: these agents use no model)."""
    if card is None:
        async with aiohttp.ClientSession() as http, \
                http.get(server.url + "/.well-known/agent-card.json") as resp:
            card = await resp.json()
    unused = ModelGatewayHandle("http://model-gateway.invalid", "-", "-", "none", None)
    return A2aAgent(name, "scribe", server.url, f"agent-{name}", "scribe:test", None, card,
                    None, unused, ctx, network_policy=policy)


def deployed_as(agent: A2aAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-in for the Docker deploy of DeployAgent.start: the agent is already serving."""
    async def start(self: DeployAgent, ctx: TaskContext, setup: Any) -> A2aAgent:
        return agent

    monkeypatch.setattr(DeployAgent, "start", start)


async def deployed_scribe(server: RunningServer, ctx: TaskContext, *prompts: str) -> A2aAgent:
    """The scribe on ``server`` as the task's agent ``scribe``, after it took ``prompts``."""
    scribe = await a2a_agent("scribe", server, ctx)
    ctx.agents["scribe"] = scribe
    async with aiohttp.ClientSession() as http:
        for text in prompts:
            await send(http, server.url, text, scribe.context_id)
    return scribe


def bucket_keys(s3_store: Any) -> list[str]:
    return sorted(s3_store.list(""))


async def test_a_saved_snapshot_is_loaded_by_a_later_deploy_and_the_agent_carries_on(
        servers: tuple[RunningServer, RunningServer], s3_runtime: Runtime, s3_store: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = servers
    ctx = task_context()
    scribe = await deployed_scribe(first, ctx, "alpha", "beta")

    await SnapshotAgentState(id="snap", agent_name="scribe").run(ctx)
    saved = ctx.outputs["snap"]
    assert saved["context_id"] == scribe.context_id
    prefix = f"runs/{ctx.instance_id}/agent_snapshots/snap/scribe/"
    for name, file in (("trajectory", "trajectory.json"), ("workspace", "workspace.tar")):
        data = s3_store.get(prefix + file)
        assert saved["objects"][name] == {"key": prefix + file, "size_bytes": len(data),
                                          "sha256": hashlib.sha256(data).hexdigest()}

    heir = await a2a_agent("heir", second, ctx)
    deployed_as(heir, monkeypatch)
    ctx.outputs["not-a-snapshot"] = {"prompt_id": "p"}
    with pytest.raises(StepError, match="'not-a-snapshot' recorded no saved snapshot"):
        await DeployAgent(id="d0", agent_name="heir",
                          agent_snapshot_step="not-a-snapshot").run(ctx)
    await DeployAgent(id="deploy-heir", agent_name="heir", agent_snapshot_step="snap",
                      agent_snapshot_target_context_id="resumed").run(ctx)
    assert ctx.outputs["deploy-heir"]["snapshot_context_id"] == "resumed"
    assert ctx.agents["heir"].context_id == "resumed"  # its prompts continue there
    assert sorted(p.name for p in (tmp_path / "b" / "notes").iterdir()) == [
        "alpha.txt", "beta.txt"]
    async with aiohttp.ClientSession() as http:
        await send(http, second.url, "gamma", "resumed")
        async with http.post(second.url + "/ext/trajectory",
                             json={"context_id": "resumed"}) as resp:
            events = (await resp.json())["trajectory"]
    assert [e["text"] for e in events] == ["alpha", "beta", "gamma"]


async def test_a_snapshot_artifact_is_staged_loaded_and_its_staging_removed(
        servers: tuple[RunningServer, RunningServer], s3_runtime: Runtime, s3_store: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = servers
    saving = task_context()
    await deployed_scribe(first, saving, "kept")
    await SnapshotAgentState(id="snap", agent_name="scribe", include_workspace=False,
                             output_prefix="saved/one").run(saving)
    assert bucket_keys(s3_store) == ["saved/one/trajectory.json"]

    artifact = ArtifactContent("@test/snap/artifacts/warm", 3, "file", [
        ArtifactFile("trajectory.json", s3_store.get("saved/one/trajectory.json"))])
    ctx = task_context(artifact)
    heir = await a2a_agent("heir", second, ctx)
    deployed_as(heir, monkeypatch)
    with pytest.raises(StepError, match=r"has no version 2 here \(it is v3\)"):
        await DeployAgent(id="d", agent_name="heir",
                          agent_snapshot_files_artifact_id=artifact.id,
                          agent_snapshot_files_artifact_version=2).run(ctx)
    await DeployAgent(id="d", agent_name="heir", agent_snapshot_files_artifact_id=artifact.id,
                      agent_snapshot_files_artifact_version=3).run(ctx)
    context_id = ctx.outputs["d"]["snapshot_context_id"]
    assert heir.context_id == context_id  # a new context the agent named
    async with aiohttp.ClientSession() as http, \
            http.post(second.url + "/ext/trajectory", json={"context_id": context_id}) as resp:
        assert [e["text"] for e in (await resp.json())["trajectory"]] == ["kept"]
    assert bucket_keys(s3_store) == ["saved/one/trajectory.json"]  # the staged copy is gone


async def test_what_cannot_take_a_snapshot_fails_the_step_and_writes_nothing(
        servers: tuple[RunningServer, RunningServer], s3_runtime: Runtime, s3_store: Any,
        tmp_path: Path) -> None:
    first, _ = servers
    ctx = task_context()
    ctx.agents["sealed"] = await a2a_agent("sealed", first, ctx, policy="sealed")
    with pytest.raises(StepError, match=r'sealed.*network_policy = "open"'):
        await SnapshotAgentState(id="s1", agent_name="sealed").run(ctx)
    ctx.agents["plain"] = await a2a_agent("plain", first, ctx, card={
        "name": "plain", "capabilities": {"extensions": []}})
    with pytest.raises(StepError, match="no snapshot/v1 extension"):
        await SnapshotAgentState(id="s2", agent_name="plain").run(ctx)
    ctx.agents["open"] = await a2a_agent("open", first, ctx)
    with pytest.raises(StepError, match=r"not_found|no context|unknown"):
        await SnapshotAgentState(id="s3", agent_name="open").run(ctx)  # nothing said yet
    async with serve_app(create_app(ScribeAgent(None))) as bare:
        ctx.agents["bare"] = await a2a_agent("bare", bare, ctx)
        async with aiohttp.ClientSession() as http:
            await send(http, bare.url, "x", ctx.agents["bare"].context_id)
        with pytest.raises(StepError, match=r"keeps no workspace.*include_workspace = false"):
            await SnapshotAgentState(id="s4", agent_name="bare").run(ctx)
    with pytest.raises(StepError, match="is not deployed in this task"):
        await SnapshotAgentState(id="s5", agent_name="nobody").run(ctx)
    assert bucket_keys(s3_store) == []
    assert not any(key.startswith("s") for key in ctx.outputs)


async def test_a_store_that_cannot_sign_urls_is_named(
        servers: tuple[RunningServer, RunningServer], tmp_path: Path) -> None:
    first, _ = servers
    runtime = Runtime()
    runtime.configure(stores={"object": {"backend": "filesystem",
                                         "path": str(tmp_path / "objects")}})
    with use(runtime):
        ctx = task_context()
        ctx.agents["scribe"] = await a2a_agent("scribe", first, ctx)
        with pytest.raises(StepError, match="cannot sign them \\(use S3 or GCS\\)"):
            await SnapshotAgentState(id="snap", agent_name="scribe").run(ctx)
    runtime.close()


async def test_an_agent_failing_halfway_leaves_no_half_snapshot(
        s3_runtime: Runtime, s3_store: Any) -> None:
    """A deliberately broken agent (a bare aiohttp app, not the SDK) uploads the trajectory
    through its grant, then fails the save."""
    from aiohttp import web

    async def save(request: web.Request) -> web.Response:
        body = await request.json()
        grant = body["objects"]["trajectory"]["write"]
        async with aiohttp.ClientSession() as http, \
                http.put(grant["url"], data=b"[]",
                         headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
        return web.json_response({"error": "disk full"}, status=500)

    app = web.Application()
    app.router.add_post("/ext/snapshot", save)
    card = {"name": "broken", "capabilities": {"extensions": [
        {"uri": "urn:agentenv:snapshot/v1", "params": {"objects": ["trajectory"]}}]}}
    async with serve_app(app) as broken:
        ctx = task_context()
        ctx.agents["broken"] = await a2a_agent("broken", broken, ctx, card=card)
        with pytest.raises(StepError, match="answered HTTP 500"):
            await SnapshotAgentState(id="s", agent_name="broken",
                                     include_workspace=False).run(ctx)
    assert bucket_keys(s3_store) == []


def test_deploy_agent_snapshot_fields_are_checked_before_the_run() -> None:
    from agent_env.tasks.steps import PreflightView

    view = PreflightView(step_ids=frozenset({"d", "s", "snap"}),
                         entities={"artifacts": frozenset({"x"})})
    both = DeployAgent(id="d", agent_snapshot_step="snap",
                       agent_snapshot_files_artifact_id="x")
    dangling = DeployAgent(id="d", agent_snapshot_target_context_id="c")
    unknown = DeployAgent(id="d", agent_snapshot_files_artifact_id="nothing-such")
    no_step = DeployAgent(id="d", agent_snapshot_step="later")
    assert "not both" in " ".join(both.check(view))
    assert "needs a snapshot to load" in " ".join(dangling.check(view))
    assert "names no artifact" in " ".join(unknown.check(view))
    assert "'later' names no step" in " ".join(no_step.check(view))
    assert "output_prefix" in " ".join(SnapshotAgentState(id="s", output_prefix="../up")
                                       .check(view))


async def test_a_changelog_kept_by_one_deploy_is_replayed_by_another_up_to_a_position(
        servers: tuple[RunningServer, RunningServer], s3_runtime: Runtime, s3_store: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = servers
    ctx = task_context()
    scribe = await a2a_agent("scribe", first, ctx)
    deployed_as(scribe, monkeypatch)
    await DeployAgent(id="deploy-a", agent_name="scribe", network_policy="open",
                      enable_agent_changelog=True).run(ctx)
    prefix = f"runs/{ctx.instance_id}/agent_changelog/deploy-a/scribe/"
    assert ctx.outputs["deploy-a"]["changelog_prefix"] == prefix
    async with aiohttp.ClientSession() as http:
        await send(http, first.url, "alpha beta -alpha", scribe.context_id)
    assert bucket_keys(s3_store) == [f"{prefix}00000{n}.tar" for n in (1, 2, 3)]

    heir = await a2a_agent("heir", second, ctx)
    deployed_as(heir, monkeypatch)
    await DeployAgent(id="deploy-b", agent_name="heir", agent_changelog_object_url="deploy-a",
                      agent_changelog_toolcall_position_exclusive=3).run(ctx)
    replayed = ctx.outputs["deploy-b"]["changelog_replayed"]
    assert replayed == {"prefix": prefix, "increments": 2, "context_id": heir.context_id}
    assert sorted(p.name for p in (tmp_path / "b" / "notes").iterdir()) == [
        "alpha.txt", "beta.txt"]  # the state before the third tool call removed alpha
    async with aiohttp.ClientSession() as http, http.post(
            second.url + "/ext/trajectory", json={"context_id": heir.context_id}) as resp:
        assert [e.get("word") for e in (await resp.json())["trajectory"]] == [
            None, "alpha", "beta"]
    assert "changelog_prefix" not in ctx.outputs["deploy-b"]  # it keeps none itself


async def test_changelog_fields_are_checked_before_the_run_and_a_sealed_agent_is_refused(
        servers: tuple[RunningServer, RunningServer], s3_runtime: Runtime, s3_store: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_env.tasks.steps import PreflightView

    view = PreflightView(step_ids=frozenset({"deploy-a"}))
    assert DeployAgent(id="d", agent_changelog_toolcall_position_exclusive=2).check(view) == [
        "agent_changelog_toolcall_position_exclusive needs a changelog to replay "
        "(agent_changelog_object_url)"]
    assert DeployAgent(id="d", network_policy="open",
                       agent_changelog_object_url="nowhere").check(view) == [
        "agent_changelog_object_url 'nowhere' is neither a step of this task nor an "
        "object-store prefix ending '/'"]
    assert DeployAgent(id="d", network_policy="open", agent_changelog_object_url="deploy-a",
                       agent_changelog_toolcall_position_exclusive=0).check(view) == [
        "agent_changelog_toolcall_position_exclusive must be 1 or more"]
    assert DeployAgent(id="d", network_policy="open",
                       agent_changelog_object_url="kept/log/").check(view) == []
    # sealed (the default): refused before anything is deployed
    assert DeployAgent(id="d", enable_agent_changelog=True,
                       agent_snapshot_step="deploy-a").check(view) == [
        "agent_snapshot_step, enable_agent_changelog: the agent's state goes through the "
        'object store, which a sealed agent cannot reach; set network_policy = "open"']

    ctx = task_context()
    deployed_as(await a2a_agent("sealed", servers[0], ctx, policy="sealed"), monkeypatch)
    with pytest.raises(StepError, match=r'cannot keep a changelog: it is sealed'):
        await DeployAgent(id="d", agent_name="sealed", enable_agent_changelog=True).run(ctx)
    deployed_as(await a2a_agent("open", servers[0], ctx), monkeypatch)
    with pytest.raises(StepError, match="no changelog increments under 'empty/'"):
        await DeployAgent(id="d", agent_name="open",
                          agent_changelog_object_url="empty/").run(ctx)
    assert bucket_keys(s3_store) == [] and "sealed" not in ctx.agents


async def test_verify_a2a_snapshot_records_the_save_and_the_scored_recall(
        servers: tuple[RunningServer, RunningServer], s3_runtime: Runtime,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The validator reads what the steps before it did: a snapshot saved to the store, and a
    rubric verifier's score of the recall; without the save, or with a failed recall, it is 0."""
    from agent_env.tasks.scores import ScoreRow
    from agentenv_agents.a2a_validators import VerifyA2aSnapshot

    first, _ = servers
    ctx = task_context()
    await deployed_scribe(first, ctx, "alpha")
    check = VerifyA2aSnapshot(id="vs", agent_name="scribe", rubric_verifier_id="recall",
                              rubric_criterion_id="remembers")
    recall = ScoreRow(0, 1.0, True, "said alpha", criterion={"id": "remembers"})
    ctx.record_verification(check, "recall", [recall], "all_pass")
    await check.run(ctx)  # no snapshot saved yet
    assert ctx.outputs["vs"]["checks"] == {"save": "failed", "recall_after_load": "passed"}
    assert ctx.verifications["vs"].score == 0.0

    await SnapshotAgentState(id="snap", agent_name="scribe").run(ctx)
    await check.run(ctx)
    assert ctx.outputs["vs"]["checks"] == {"save": "passed", "recall_after_load": "passed"}
    assert ctx.verifications["vs"].score == 1.0

    forgot = ScoreRow(0, 0.0, False, "said nothing", criterion={"id": "remembers"})
    ctx.record_verification(check, "recall", [forgot], "all_pass")
    await check.run(ctx)
    assert ctx.outputs["vs"]["checks"]["recall_after_load"] == "failed"

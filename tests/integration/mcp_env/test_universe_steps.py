"""The universe round trip on real env servers behind a real gateway (in this process): a
server that keeps what it is given passes; one that changes it on the way in fails, with the
difference named; combine_universe_verdicts gates that verdict by a judge's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent_env.api import ScoreRow, StepError, stored_artifacts
from agent_env.tasks.context import TaskContext
from agentenv_mcp_env.control_steps import SnapshotEnv
from agentenv_mcp_env.deployment import EnvServerRecord, GatewayDeployment
from agentenv_mcp_env.universe_steps import (
    CombineUniverseVerdicts,
    VerifyUniverseLoadExportRoundtrip,
    differences,
)
from agentenv_protocol import (
    AgentEnvEnvironment,
    McpClient,
    TextPart,
    add_data,
    environment_card,
    get_data,
    reset_data,
    tool,
)
from agentenv_protocol.testing import serve_env, serve_gateway


@pytest.fixture(autouse=True)
def _private_state(state_root: Any) -> Any:
    return state_root


class _Notes(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.notes: list[str] = []

    @tool(name="{environment_name}_add")
    def add(self, text: str) -> str:
        self.notes.append(text)
        return "ok"

    @get_data
    def now(self) -> list:
        return [TextPart(n) for n in self.notes]

    @reset_data
    def forget(self) -> None:
        self.notes = []

    @add_data
    def seed(self, parts: list) -> None:
        self.notes += [self.taken(p.text) for p in parts]

    def taken(self, text: str) -> str:
        return text


@environment_card(name="notes")
class NotesEnv(_Notes):
    pass


@environment_card(name="shouty")
class ShoutyEnv(_Notes):
    """Loses information on the way in: what it is given comes back in capitals."""

    def taken(self, text: str) -> str:
        return text.upper()


@pytest.fixture
async def office() -> AsyncIterator[TaskContext]:
    async with serve_env(NotesEnv()) as a, serve_env(ShoutyEnv()) as b, \
            serve_gateway([a.url, b.url]) as gw:
        env = GatewayDeployment(
            env_id="office", env_version=1, instance_id="office-1", environment_name="office",
            url=gw.url, token=gw.token, image="", gateway_image="", created_at="",
            expires_at="", servers=(EnvServerRecord("notes", 1, "env-notes", "", "notes"),
                                    EnvServerRecord("shouty", 1, "env-shouty", "", "shouty")))
        ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=stored_artifacts())
        ctx.add_env("office", env)
        async with McpClient(gw.mcp_url) as client:
            for name in ("notes", "shouty"):
                await client.call_tool(f"{name}_add", {"text": "Keep me"})
                await client.call_tool(f"{name}_add", {"text": "and me"})
        await SnapshotEnv(id="seed", env_id="office", snapshot_id="universes/office").run(ctx)
        yield ctx


async def test_a_lossy_server_fails_the_round_trip_naming_the_difference(
        office: TaskContext) -> None:
    ctx = office
    step = VerifyUniverseLoadExportRoundtrip(id="rt", env_id="office",
                                             universe_artifact_id="universes/office")
    await step.run(ctx)
    out = ctx.outputs["rt"]
    assert out["compatible"] is False
    assert out["services"]["notes"]["compatible"] is True
    shouty = out["services"]["shouty"]
    assert shouty["compatible"] is False and shouty["load_compared"] is True
    assert shouty["issues"] == ["universe→export1.parts: 2 of 2 items differ, e.g. "
                                '{"kind": "text", "text": "Keep me"}']  # export 2 = export 1
    verification = ctx.verifications["rt"]
    assert [(r.criterion["id"], r.result) for r in verification.results] == [
        ("notes", True), ("shouty", False)]
    assert out["exported_universe_artifact_id"] == "snapshots/t-1/rt/export1"

    combine = CombineUniverseVerdicts(id="final", env_id="office",
                                      universe_artifact_id="universes/office",
                                      judge_verifier_id="judge")
    await combine.run(ctx)  # no judge recorded: the verdict stands, marked ungated
    assert ctx.outputs["final"]["agent_judge_skipped"] is True
    assert ctx.verifications["final"].score == 0.0


async def test_the_judge_gates_a_compatible_round_trip(office: TaskContext) -> None:
    ctx = office
    await VerifyUniverseLoadExportRoundtrip(
        id="rt", env_id="office", universe_artifact_id="universes/office").run(ctx)
    ctx.outputs["rt"]["compatible"] = True  # as if only the faithful server were there
    combine = CombineUniverseVerdicts(id="final", env_id="office",
                                      universe_artifact_id="universes/office",
                                      judge_verifier_id="judge")
    for score, expected in ((1.0, True), (0.0, False)):
        ctx.record_verification(combine, "judge", [
            ScoreRow(0, score, score == 1.0, "the judge's view")], "all_pass")
        await combine.run(ctx)
        assert ctx.outputs["final"]["compatible"] is expected
        assert ctx.outputs["final"]["agent_judge"] == {"verifier_id": "judge", "score": score}


async def test_without_a_round_trip_there_is_nothing_to_combine() -> None:
    ctx = TaskContext(task_id="t", instance_id="t-2", artifacts=stored_artifacts())
    with pytest.raises(StepError, match="no verify_universe_load_export_roundtrip verdict"):
        await CombineUniverseVerdicts(id="c", env_id="e", universe_artifact_id="u",
                                      judge_verifier_id="j").run(ctx)


def test_lists_compare_as_multisets() -> None:
    assert differences({"a": [1, 2, {"b": 3}]}, {"a": [{"b": 3}, 2, 1]}) == []
    assert differences({"a": [1]}, {"a": [1, 1]}) == ["$.a: 1 items against 2"]
    assert differences({"x": 1}, {"y": 1}) == ["$.x: missing from the second",
                                               "$.y: missing from the first"]

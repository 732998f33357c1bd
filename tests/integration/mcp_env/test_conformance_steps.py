"""verify_spec_conformance and verify_mcp_env_assessment against a real env server behind a
real gateway (in this process): drift between an OpenAPI spec and the live tools is found and
named per operation; an agent's JSON report is graded per tool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from agent_env.api import PreflightView, StepError
from agent_env.tasks.artifacts import ArtifactContent, ArtifactFile, MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agentenv_mcp_env.conformance_steps import VerifyMcpEnvAssessment, VerifySpecConformance
from agentenv_mcp_env.deployment import GatewayDeployment
from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.testing import serve_env, serve_gateway

SPEC = b"""
openapi: 3.0.0
info: {title: mail, version: "1"}
paths:
  /mail/search:
    get:
      operationId: mail_search
      parameters:
        - {name: query, in: query, required: true, schema: {type: string}}
        - {name: limit, in: query, schema: {type: integer}}
  /mail/send:
    post:
      operationId: mail_send
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Send"}
  /mail/archive:
    post:
      operationId: mail_archive
components:
  schemas:
    Send:
      type: object
      required: [to]
      properties:
        to: {type: string}
        priority: {type: string, enum: [low, high]}
"""


@pytest.fixture(autouse=True)
def _private_state(state_root: Any) -> Any:
    return state_root


@environment_card(name="mail")
class MailEnv(AgentEnvEnvironment):
    @tool(name="mail_search")
    def search(self, query: str, limit: int = 10) -> str:
        return "nothing"

    @tool(name="mail_send")
    def send(self, to: str, priority: Literal["low", "urgent"] = "low",
             cc: Annotated[str, Field(description="must be given")] = "") -> str:
        return "sent"

    @tool(name="mail_purge")
    def purge(self, really: bool) -> str:
        return "gone"


@pytest.fixture
async def mail() -> AsyncIterator[TaskContext]:
    spec = ArtifactContent("mail-spec", 1, "file", (ArtifactFile("openapi.yaml", SPEC, 0o644),))
    async with serve_env(MailEnv()) as server, serve_gateway([server.url]) as gw:
        env = GatewayDeployment(env_id="mail", env_version=1, instance_id="mail-1",
                                environment_name="mail", url=gw.url, token=gw.token, image="",
                                gateway_image="", created_at="", expires_at="")
        ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts([spec]))
        ctx.add_env("mail", env)
        yield ctx


async def test_spec_drift_is_found_per_operation(mail: TaskContext) -> None:
    ctx = mail
    await VerifySpecConformance(id="spec", env_id="mail", spec_artifact_id="mail-spec",
                                service="mail").run(ctx)
    rows = {r.criterion["id"]: (r.result, r.justification)
            for r in ctx.verifications["spec"].results}
    assert rows["mail_search"] == (True, "conforms")
    ok, why = rows["mail_send"]
    assert not ok and "mail_send.priority: the spec allows ['low', 'high']" in why
    assert rows["mail_archive"] == (False, "no tool serves operation 'mail_archive'")
    findings = ctx.outputs["spec"]["findings"]
    assert [f["kind"] for f in findings["(extra tools)"]] == ["extra_tool"]  # mail_purge
    assert {f["kind"] for f in findings["mail_send"]} == {"enum_mismatch", "extra_param"}
    assert ctx.verifications["spec"].score == 0.0


async def test_no_spec_anywhere_is_not_scored(mail: TaskContext) -> None:
    await VerifySpecConformance(id="spec", env_id="mail").run(mail)
    assert mail.outputs["spec"]["skipped"] is True and "spec" not in mail.verifications


async def test_a_spec_that_is_not_one_is_named(mail: TaskContext) -> None:
    bad = ArtifactContent("bad", 1, "file", (ArtifactFile("x.json", b"{\"a\": 1}", 0o644),))
    ctx = TaskContext(task_id="t", instance_id="t-2", artifacts=MemoryArtifacts([bad]))
    ctx.add_env("mail", mail.env("mail"))
    with pytest.raises(StepError, match="is not an OpenAPI spec"):
        await VerifySpecConformance(id="s", env_id="mail", spec_artifact_id="bad").run(ctx)


async def test_an_agents_assessment_is_graded_per_tool(mail: TaskContext) -> None:
    ctx = mail
    ctx.outputs["ask"] = {"prompt_id": "ask", "response": (
        '```json\n{"results": [{"tool": "mail_search", "passed": true}, '
        '{"tool": "mail_send", "passed": false, "reason": "priority urgent is refused"}]}\n```')}
    step = VerifyMcpEnvAssessment(id="assess", env_id="mail", prompt_id="ask")
    await step.run(ctx)
    rows = ctx.verifications["assess"].results
    assert [(r.criterion["id"], r.result, r.justification) for r in rows] == [
        ("mail_search", True, ""), ("mail_send", False, "priority urgent is refused")]
    ctx.outputs["ask"] = {"prompt_id": "ask", "response": "All tools work fine!"}
    await step.run(ctx)
    [row] = ctx.verifications["assess"].results
    assert not row.result and row.justification.startswith("the reply is not JSON")
    view = PreflightView(step_ids=frozenset({"assess"}), entities={"envs": frozenset({"mail"})})
    assert step.check(view) == [
        "prompt_id 'ask' is no step of this task (name the prompt_agent whose reply is the "
        "assessment)"]

"""trajectory/v1's object form end to end on real parts: an SDK agent served on loopback PUTs a
whole trajectory through a boto3 presigned URL into moto's S3, and the runtime's reader
(agentenv_agents.trajectory_objects) takes it from the store, checks it and removes the upload.
The agent-side refusals answer the transfer contract's codes with nothing written."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent_env.stores.filesystem import FilesystemObjectStore
from agentenv_agents.object_forms import offers_objects
from agentenv_agents.trajectory_objects import read_by_object
from agentenv_aws_stores.s3 import S3ObjectStore
from agentenv_protocol.agent import (
    TRAJECTORY_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
    create_app,
)
from agentenv_protocol.testing import RunningServer, serve_app

SOON = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()


@a2a_agent(identity=AgentIdentity(name="stepper", description="Writes n trajectory events."),
           extensions=(TRAJECTORY_V1,))
class StepperAgent(AgentEnvAgent):
    async def run(self, request: TaskRequest[AgentConfig]) -> TaskResult:
        request.trajectory.set_format("stepper/1")
        for i in range(int(request.text)):
            request.trajectory.append({"type": "step", "i": i, "pad": "x" * 100})
        return TaskResult(text="done")


@pytest.fixture
async def agent() -> AsyncIterator[RunningServer]:
    async with serve_app(create_app(StepperAgent())) as server:
        yield server


async def _task(http: aiohttp.ClientSession, url: str, steps: int) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"messageId": "m1", "role": "user", "kind": "message",
                    "parts": [{"kind": "text", "text": str(steps)}]},
        "configuration": {"blocking": True}}}
    async with http.post(url + "/a2a", json=body) as resp:
        result = (await resp.json())["result"]
    assert result["status"]["state"] == "completed"
    return str(result["id"])


async def test_whole_trajectory_arrives_through_the_store(agent: RunningServer,
                                                         s3_store: S3ObjectStore) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(agent.url + "/.well-known/agent-card.json") as resp:
            assert offers_objects(await resp.json(), "trajectory", "trajectory")
        task_id = await _task(http, agent.url, 3000)
        events, why = await read_by_object(http, agent.url, task_id, s3_store, "staging/t")
        assert why is None
        async with http.post(agent.url + "/ext/trajectory", json={"task_id": task_id}) as resp:
            inline = (await resp.json())["trajectory"]
    assert events == inline and len(events) == 3000
    assert s3_store.list("staging/") == []  # the upload was read and removed


async def test_agent_refusals_have_the_contract_codes_and_write_nothing(
        agent: RunningServer, s3_store: S3ObjectStore) -> None:
    async with aiohttp.ClientSession() as http:
        task_id = await _task(http, agent.url, 50)

        async def ask(objects: Any, **extra: Any) -> tuple[int, Any]:
            async with http.post(agent.url + "/ext/trajectory",
                                 json={"task_id": task_id, "objects": objects, **extra}) as resp:
                return resp.status, await resp.json()

        url = s3_store.signed_put_url("k.json", content_type="application/json")

        def grant(max_bytes: int = 1 << 20, expires_at: str = SOON) -> dict[str, Any]:
            return {"media_type": "application/json", "max_bytes": max_bytes,
                    "write": {"kind": "http_put", "url": url, "expires_at": expires_at}}

        status, body = await ask({"trajectory": grant(expires_at="2020-01-01T00:00:00Z")})
        assert (status, body["error"]["code"]) == (410, "grant_expired")
        status, body = await ask({"trajectory": grant(max_bytes=100)})
        assert (status, body["error"]["code"]) == (413, "transfer_too_large")
        status, body = await ask({"trajectory": {"media_type": "application/json"}})
        assert (status, body["error"]["code"]) == (400, "invalid_transfer")
        foreign = grant()
        foreign["write"]["url"] = "http://example.com/upload"  # not https, not loopback
        status, body = await ask({"trajectory": foreign})
        assert (status, body["error"]["code"]) == (400, "invalid_transfer")
        assert (await ask({"workspace": grant()}))[0] == 400
        assert (await ask({"trajectory": grant()}, after=0))[0] == 400
        assert s3_store.list("") == []  # nothing partly written
        status, body = await ask({"trajectory": grant()})
        assert status == 200 and body["objects"]["trajectory"]["size_bytes"] > 100
        assert s3_store.list("") == ["k.json"]


async def test_a_store_that_cannot_sign_falls_back(agent: RunningServer, tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as http:
        task_id = await _task(http, agent.url, 2)
        events, why = await read_by_object(http, agent.url, task_id,
                                           FilesystemObjectStore(tmp_path), "staging/t")
    assert events is None and why is not None and "does not sign" in why

"""Fixtures for the model gateway tests: real gateways on 127.0.0.1 (free ports), in front of
the scripted model or of a real local HTTP server (the test double in fake_openai_upstream.py),
driven by the official ``openai`` and ``anthropic`` SDKs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_openai_upstream import KEY, FakeUpstream
from gateway_helpers import SCRIPT, TOKEN

from agentenv_agents.model_gateway import HttpUpstream, ModelGateway
from agentenv_agents.records import CallRecorder
from agentenv_agents.scripted import ScriptedUpstream
from agentenv_protocol.testing import RunningServer, serve_app


@pytest.fixture
def script_path(tmp_path: Path) -> Path:
    path = tmp_path / "fix-bug.json"
    path.write_text(json.dumps(SCRIPT))
    return path


@pytest.fixture
async def scripted_gateway(script_path: Path, tmp_path: Path) -> AsyncIterator[ModelGateway]:
    recorder = CallRecorder(tmp_path / "model_calls.jsonl")
    gateway = ModelGateway(ScriptedUpstream(script_path), token=TOKEN, host="127.0.0.1",
                           recorder=recorder)
    await gateway.start()
    yield gateway
    await gateway.stop()
    recorder.close()


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeUpstream, RunningServer]]:
    upstream = FakeUpstream()
    async with serve_app(upstream.app()) as server:
        yield upstream, server


@pytest.fixture
async def http_gateway(fake: tuple[FakeUpstream, RunningServer]
                       ) -> AsyncIterator[ModelGateway]:
    _, server = fake
    gateway = ModelGateway(HttpUpstream(f"{server.url}/v1", KEY,
                                        {"X-Team": "agents-test"}),
                           token=TOKEN, host="127.0.0.1", aliases={"agent": "fake-model"})
    await gateway.start()
    yield gateway
    await gateway.stop()

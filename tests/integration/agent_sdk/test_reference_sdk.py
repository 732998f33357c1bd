"""An agent written for the reference framework's SDK serves unchanged on ours.

The agent is the reference's own deterministic echo agent (``tst/data/a2a_agent/agent.py`` of
``agentenv-framework==0.9.1364``), taken from its sdist on PyPI at test time (nothing of the
reference is committed). It imports ``agentenv_protocol.a2a_agent`` (pydantic-style
``AgentConfig`` with a ``WriteOnly`` field, ``TaskResult.builder()``, ``@extension`` skill
handlers) and is served here by this package's ``create_app``, spoken to over raw JSON-RPC.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from agent_sdk_helpers import Rpc, reply_data, reply_text

from agentenv_protocol.a2a_agent import create_app
from agentenv_protocol.testing import serve_app

REFERENCE = "agentenv-framework==0.9.1364"
MEMBER = "tst/data/a2a_agent/agent.py"


@pytest.fixture(scope="session")
def reference_agent_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reference-sdist")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--disable-pip-version-check", "-q", REFERENCE, "-d", str(folder)],
        capture_output=True, text=True, timeout=300, check=False)
    archives = sorted(folder.glob("*.tar.gz"))
    if done.returncode != 0 or not archives:
        message = f"cannot download the {REFERENCE} sdist: {done.stderr.strip()[-500:]}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + " (CI never skips this test)")
        pytest.skip(message)
    with tarfile.open(archives[0]) as sdist:
        member = next(m for m in sdist.getmembers() if m.name.endswith("/" + MEMBER))
        data = sdist.extractfile(member)
        assert data is not None
        path = folder / "agent.py"
        path.write_bytes(data.read())
    return path


@pytest.fixture
async def served(reference_agent_file: Path, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, Any]]:
    monkeypatch.setenv("HOME", str(tmp_path))  # where it installs skills (~/skills)
    spec = importlib.util.spec_from_file_location("reference_echo_agent", reference_agent_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    async with serve_app(create_app(module.EchoAgent())) as server:
        yield server.url, module


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session


async def test_it_answers_with_its_result_builder_and_usage(
        served: tuple[str, Any], http: aiohttp.ClientSession) -> None:
    url, _ = served
    async with http.get(url + "/.well-known/agent-card.json") as resp:
        card = await resp.json()
    assert card["name"] == "agentenv-echo-agent" and card["version"] == "1.0.0"
    uris = {e["uri"] for e in card["capabilities"]["extensions"]}
    # served: config, MCP, trajectory, (for its @extension handlers) skills and triggers/v1
    assert uris == {"urn:agentenv:agent-config/v1", "urn:agentenv:mcp-config/v1",
                    "urn:agentenv:trajectory/v1", "urn:agentenv:skill-config/v1",
                    "urn:agentenv:triggers/v1"}
    rpc = Rpc(http, url)
    task = await rpc.send("hello there")
    assert task["status"]["state"] == "completed"
    assert reply_text(task) == "Echo: hello there"
    usage = reply_data(task)["usage"]
    assert (usage["tool_call_count"], usage["input_tokens"], usage["output_tokens"]) == (
        0, len("hello there"), len("Echo: hello there"))
    async with http.post(url + "/ext/trajectory",
                         json={"task_id": task["id"], "after": 0}) as resp:
        trajectory = await resp.json()
    assert trajectory["format"] == "agentenv-echo-agent/v1"
    assert trajectory["events"] == [{"type": "echo", "input": "hello there",
                                     "output": "Echo: hello there"}]


async def test_its_config_takes_a_write_only_field(served: tuple[str, Any],
                                                   http: aiohttp.ClientSession) -> None:
    url, _ = served
    async with http.post(url + "/ext/agent-config",
                         json={"model": "m-1", "model_params": {"temperature": 0}}) as resp:
        assert resp.status == 200
    async with http.get(url + "/ext/agent-config") as resp:
        shown = await resp.json()
    assert shown == {"config": {"model": "m-1", "model_params": "***"}}
    async with http.post(url + "/ext/agent-config", json={"colour": "red"}) as resp:
        assert resp.status == 400


async def test_its_skill_handlers_install_what_the_runtime_adds(
        served: tuple[str, Any], http: aiohttp.ClientSession, tmp_path: Path) -> None:
    url, _ = served
    async with http.post(url + "/ext/skill-config", json={
            "name": "tone", "description": "How to sound.", "skill_md": "# Tone\nBe brief."
    }) as resp:
        assert resp.status == 200, await resp.text()
    assert (tmp_path / "skills" / "tone" / "SKILL.md").read_text() == "# Tone\nBe brief."
    task = await Rpc(http, url).send("list-skills")
    assert reply_text(task) is not None
    assert reply_text(task).splitlines()[1].startswith("skill tone: SKILL.md=")


async def test_a_file_it_sends_back_is_a_file_part(served: tuple[str, Any],
                                                   http: aiohttp.ClientSession) -> None:
    url, _ = served
    task = await Rpc(http, url).send("send-file https://example.invalid/out/report.txt")
    files = [p for p in task["status"]["message"]["parts"] if p["kind"] == "file"]
    assert files == [{"kind": "file", "file": {"uri": "https://example.invalid/out/report.txt",
                                               "name": "report.txt",
                                               "mimeType": "text/plain"}}]


async def test_a_streaming_agent_and_a_failure_in_the_references_shapes(
        http: aiohttp.ClientSession) -> None:
    """Written here in the reference's style: a streaming ``run`` yielding ``TaskProgress``,
    then ``TaskResult.text``; ``TaskResult.failure`` is a failed task with its code."""
    from agentenv_protocol.a2a_agent import (
        AgentEnvAgent,
        AgentIdentity,
        TaskProgress,
        TaskRequest,
        TaskResult,
        TextPart,
        a2a_agent,
    )

    @a2a_agent(identity=AgentIdentity(name="steps", description="streams", version="1"))
    class Steps(AgentEnvAgent):
        async def run(self, request: TaskRequest[Any]) -> Any:
            text = "".join(p.text for p in request.parts if isinstance(p, TextPart))
            if text == "no":
                yield TaskResult.failure("steps.refused", "I will not")
                return
            yield TaskProgress.text("halfway")
            yield TaskResult.text(f"done: {text}")

    async with serve_app(create_app(Steps())) as server:
        rpc = Rpc(http, server.url)
        task = await rpc.send("go")
        assert (task["status"]["state"], reply_text(task)) == ("completed", "done: go")
        failed = await rpc.send("no")
        assert failed["status"]["state"] == "failed"
        data = reply_data(failed)
        assert (data["error_type"], data["error_code"], data["error_message"]) == (
            "agent_error", "steps.refused", "I will not")


def test_what_is_not_served_here_is_refused_when_the_class_is_defined() -> None:
    from agentenv_protocol.a2a_agent import (
        SNAPSHOT_V1,
        AgentEnvAgent,
        AgentIdentity,
        TaskResult,
        a2a_agent,
        extension,
    )

    with pytest.raises(TypeError, match=r"only skill-config/v1 add\.inline and add\.bundle"):
        extension(SNAPSHOT_V1.save)
    with pytest.raises(TypeError, match="lifespan is a Starlette hook"):
        @a2a_agent(identity=AgentIdentity(name="x", description="x", version="1"),
                   lifespan=lambda app: None)
        class Lifespan(AgentEnvAgent):
            async def run(self, request: Any) -> Any:
                return TaskResult.text("x")

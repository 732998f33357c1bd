"""How turns run: the final reply's data part, failures, ordering within and across contexts,
and what the decorator refuses."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import attrs
import pytest
from agent_sdk_helpers import EchoAgent, Rpc, Served, reply_data, reply_text

from agentenv_protocol.agent import (
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
    create_app,
)
from agentenv_protocol.testing import free_port, serve_app


async def test_usage_and_structured_output(rpc: Rpc) -> None:
    task = await rpc.send("count me")
    assert reply_text(task) == "echo: count me"
    data = reply_data(task)
    assert data == {
        "usage": {"tool_call_count": 2, "input_tokens": 10, "output_tokens": 5,
                  "total_tokens": 15, "cost_usd": 0.25},
        "error_type": None, "error_code": None, "error_message": None,
        "structured_output": {"length": 8},
    }


async def test_unhandled_exception_is_infra_error(rpc: Rpc) -> None:
    task = await rpc.send("fail")
    assert task["status"]["state"] == "failed"
    data = reply_data(task)
    assert data["error_type"] == "infra_error"
    assert data["error_code"] == "framework.unhandled_exception"
    assert "the model exploded" in data["error_message"]


async def test_empty_success_is_refused(rpc: Rpc) -> None:
    task = await rpc.send("empty")
    assert task["status"]["state"] == "failed"
    data = reply_data(task)
    assert data["error_type"] == "agent_error"
    assert data["error_code"] == "framework.empty_result"


async def test_agent_reported_failure(rpc: Rpc) -> None:
    task = await rpc.send("refuse")
    assert task["status"]["state"] == "failed"
    assert reply_text(task) == "I will not do that"
    data = reply_data(task)
    assert (data["error_type"], data["error_code"]) == ("agent_error", "echo.refused")


async def test_wrong_return_type(rpc: Rpc) -> None:
    task = await rpc.send("badtype")
    data = reply_data(task)
    assert (task["status"]["state"], data["error_type"], data["error_code"]) == (
        "failed", "infra_error", "framework.invalid_result")


async def test_input_required_then_continue(rpc: Rpc, echo: Served) -> None:
    task = await rpc.send("ask", context_id="ctx-ask")
    assert task["status"]["state"] == "input-required"
    assert reply_text(task) == "which one?"
    more = await rpc.send("the blue one", task_id=task["id"])
    assert more["id"] == task["id"] and more["contextId"] == "ctx-ask"
    assert more["status"]["state"] == "completed"
    assert reply_text(more) == "echo: the blue one"
    roles = [m["role"] for m in more["history"]]
    assert roles == ["user", "agent", "user"]
    # a completed task takes no further message
    out = await rpc.call("message/send", {"message": {
        "messageId": "again", "role": "user", "taskId": task["id"],
        "parts": [{"kind": "text", "text": "x"}]}})
    assert out["error"]["code"] == -32602


async def test_turns_in_one_context_run_serially(rpc: Rpc, echo: Served) -> None:
    tasks = [await rpc.send("sleep:0.4", context_id="same", blocking=False) for _ in range(3)]
    # each answer comes at once, before any run finished
    assert all(t["status"]["state"] in ("submitted", "working") for t in tasks)
    done = [await rpc.wait(t["id"]) for t in tasks]
    assert all(t["status"]["state"] == "completed" for t in done)
    turns = sorted(echo.agent.turns, key=lambda t: t.start)
    assert [t.task_id for t in turns] == [t["id"] for t in tasks], "arrival order kept"
    assert echo.agent.max_active["same"] == 1
    for earlier, later in itertools.pairwise(turns):
        assert later.start >= earlier.end


async def test_contexts_run_concurrently(rpc: Rpc, echo: Served) -> None:
    tasks = [await rpc.send("sleep:1.5", context_id=f"ctx-{i}", blocking=False)
             for i in range(3)]
    done = [await rpc.wait(t["id"]) for t in tasks]
    assert all(t["status"]["state"] == "completed" for t in done)
    turns = echo.agent.turns
    assert len(turns) == 3
    # all three were running at one moment: each started before any finished
    assert max(t.start for t in turns) < min(t.end for t in turns)  # type: ignore[type-var]


async def test_blocking_sends_to_different_contexts_overlap(rpc: Rpc, echo: Served) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    results = await asyncio.gather(*(rpc.send("sleep:1", context_id=f"b{i}")
                                     for i in range(4)))
    elapsed = loop.time() - started
    assert all(r["status"]["state"] == "completed" for r in results)
    assert elapsed < 3.5, f"4 x 1 s turns in 4 contexts took {elapsed:.1f} s (serialised?)"


async def test_streaming_agent_failures(http: aiohttp.ClientSession) -> None:
    @a2a_agent(identity=AgentIdentity(name="s"))
    class Broken(AgentEnvAgent):
        async def run(self, request: TaskRequest[Any]) -> AsyncIterator[Any]:
            yield "working on it"
            if request.text == "boom":
                raise ValueError("kaput")
            if request.text == "odd":
                yield 42
            # running out without a TaskResult is an empty success

    async with serve_app(create_app(Broken())) as server:
        rpc = Rpc(http, server.url)
        data = reply_data(await rpc.send("boom"))
        assert (data["error_type"], data["error_code"]) == ("infra_error",
                                                            "framework.unhandled_exception")
        data = reply_data(await rpc.send("odd"))
        assert data["error_code"] == "framework.invalid_result"
        data = reply_data(await rpc.send("nothing"))
        assert (data["error_type"], data["error_code"]) == ("agent_error",
                                                            "framework.empty_result")


async def test_setup_and_teardown(http: aiohttp.ClientSession) -> None:
    calls: list[str] = []

    @a2a_agent(identity=AgentIdentity(name="life"))
    class Life(AgentEnvAgent):
        async def setup(self) -> None:
            calls.append("setup")

        async def teardown(self) -> None:
            calls.append("teardown")

        async def run(self, request: TaskRequest[Any]) -> TaskResult:
            return TaskResult(text="ok")

    async with serve_app(create_app(Life())):
        assert calls == ["setup"]
    assert calls == ["setup", "teardown"]


# -- the decorator ---------------------------------------------------------------------------


def test_sync_run_is_refused() -> None:
    with pytest.raises(TypeError, match="async def"):
        @a2a_agent(identity=AgentIdentity(name="sync"))
        class Sync(AgentEnvAgent):
            def run(self, request: TaskRequest[Any]) -> TaskResult:  # type: ignore[override]
                return TaskResult(text="no")


def test_other_refusals() -> None:
    with pytest.raises(TypeError, match="must implement run"):
        @a2a_agent(identity=AgentIdentity(name="none"))
        class NoRun(AgentEnvAgent):
            pass

    with pytest.raises(TypeError, match="AgentEnvAgent"):
        @a2a_agent(identity=AgentIdentity(name="plain"))
        class Plain:
            async def run(self, request: Any) -> TaskResult:
                return TaskResult(text="x")

    with pytest.raises(TypeError, match="unknown extension"):
        a2a_agent(identity=AgentIdentity(name="x"), extensions=("urn:agentenv:nope/v1",))

    @attrs.define
    class NoDefault(AgentConfig):
        model: str = attrs.field(kw_only=True)

    with pytest.raises(TypeError, match="model"):
        a2a_agent(identity=AgentIdentity(name="x"), config=NoDefault)

    @attrs.define
    class NotAConfig:
        model: str | None = None

    with pytest.raises(TypeError, match="AgentConfig"):
        a2a_agent(identity=AgentIdentity(name="x"), config=NotAConfig)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="error_type"):
        TaskResult(error_type="oops")  # type: ignore[arg-type]


def test_importing_the_package_stays_cheap() -> None:
    code = ("import sys, agentenv_protocol, agentenv_protocol.agent as a; "
            "from agentenv_protocol.agent import AgentEnvAgent, a2a_agent, TaskResult; "
            "print(sorted(m for m in ('aiohttp', 'cattrs', 'agentenv_protocol.agent.app') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


async def test_old_terminal_tasks_are_forgotten(http: aiohttp.ClientSession) -> None:
    async with serve_app(create_app(EchoAgent(), max_tasks=2)) as server:
        rpc = Rpc(http, server.url)
        waiting = await rpc.send("ask")  # input-required: not terminal, never forgotten
        first = await rpc.send("one")
        second = await rpc.send("two")
        third = await rpc.send("three")
        for gone in (first, second):
            assert (await rpc.call("tasks/get", {"id": gone["id"]}))["error"]["code"] == -32001
        for kept in (waiting, third):
            assert "result" in await rpc.call("tasks/get", {"id": kept["id"]})


def test_serve_binds_a2a_host_and_port(tmp_path: Any) -> None:
    """``agent.serve()`` with no arguments listens where A2A_HOST / A2A_PORT say."""
    script = tmp_path / "agent.py"
    script.write_text(
        "from agentenv_protocol.agent import (AgentEnvAgent, AgentIdentity, TaskResult,\n"
        "                                     a2a_agent)\n"
        "@a2a_agent(identity=AgentIdentity(name='served'))\n"
        "class A(AgentEnvAgent):\n"
        "    async def run(self, request):\n"
        "        return TaskResult(text='hi')\n"
        "A().serve()\n")
    port = free_port()
    env = {**os.environ, "A2A_HOST": "127.0.0.1", "A2A_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, str(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    assert r.read() == b'{"status": "ok"}'
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "the agent never answered /health"
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)

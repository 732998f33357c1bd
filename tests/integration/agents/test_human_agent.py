"""deploy_human_agent on a real env server behind a real gateway (in this process): a prompt
to the person waits as an ask; the person (here ``agent-env task answer``, run as a user runs
it) calls an env tool through the run and answers; the reply carries the answer and the call.
Nobody answering fails the prompt at its timeout, and the ask ends expired."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_env.api import StepError, asks
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agentenv_agents.human import DeployHumanAgent
from agentenv_agents.steps import PromptAgent
from agentenv_mcp_env.deployment import GatewayDeployment
from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.testing import serve_env, serve_gateway

AGENT_ENV = Path(sys.executable).with_name("agent-env")


@environment_card(name="desk")
class DeskEnv(AgentEnvEnvironment):
    def __init__(self) -> None:
        self.callers: list[str] = []

    @tool(name="lookup")
    def lookup(self, order: str) -> str:
        return f"order {order} shipped on Monday"


@pytest.fixture
async def desk(state_root: Path) -> AsyncIterator[TaskContext]:
    async with serve_env(DeskEnv()) as server, serve_gateway([server.url]) as gw:
        env = GatewayDeployment(env_id="desk", env_version=1, instance_id="desk-1",
                                environment_name="desk", url=gw.url, token=gw.token, image="",
                                gateway_image="", created_at="", expires_at="")
        ctx = TaskContext(task_id="t", instance_id="run-7", artifacts=MemoryArtifacts())
        ctx.add_env("desk", env)
        yield ctx


def cli(state_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENT_ENV_STATE_DIR": str(state_root)}
    env.pop("AGENT_ENV_CONFIG", None)
    return subprocess.run([str(AGENT_ENV), "task", "answer", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


async def test_a_person_calls_a_tool_and_answers(desk: TaskContext, state_root: Path) -> None:
    ctx = desk
    await DeployHumanAgent(id="human", env_ids=["desk"], role="support",
                           poll_interval_seconds=0.1).run(ctx)
    assert ctx.outputs["human"] == {"agent_name": "human_agent", "type": "human",
                                    "answered_in": "inbox", "envs": ["desk"],
                                    "role": "support"}
    ask_step = PromptAgent(id="ask", agent_name="human_agent", timeout_seconds=60,
                           prompt="When did order 42 ship?")
    asking = asyncio.ensure_future(ask_step.run(ctx))
    while not asks().awaiting():
        await asyncio.sleep(0.05)
    listed = await asyncio.to_thread(cli, state_root, "--list")
    assert "human_agent" in listed.stdout and "When did order 42 ship?" in listed.stdout
    shown = await asyncio.to_thread(cli, state_root, "--id", "run-7")
    assert "tool lookup" in shown.stdout, shown.stdout + shown.stderr
    called = await asyncio.to_thread(cli, state_root, "--id", "run-7", "--call", "lookup",
                                     "--args", '{"order": "42"}')
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip() == "order 42 shipped on Monday"
    bad = await asyncio.to_thread(cli, state_root, "--id", "run-7", "--call", "delete_all")
    assert bad.returncode != 0 and "tool 'delete_all' is not one this ask offers" in bad.stderr
    done = await asyncio.to_thread(cli, state_root, "--id", "run-7", "--text", "On Monday.",
                                   "--by", "ada")
    assert done.returncode == 0, done.stderr
    await asyncio.wait_for(asking, 30)
    out = ctx.outputs["ask"]
    assert out["response"] == "On Monday." and out["tool_call_count"] == 1
    [ask] = asks().all()
    assert (ask.state, ask.answered_by) == ("answered", "ada")
    again = await asyncio.to_thread(cli, state_root, "--ask", ask.ask_id, "--text", "again")
    assert again.returncode != 0 and "was already answered by ada" in again.stderr


async def test_nobody_answering_fails_the_prompt_and_expires_the_ask(desk: TaskContext) -> None:
    ctx = desk
    await DeployHumanAgent(id="human", poll_interval_seconds=0.05, env_ids=["desk"]).run(ctx)
    with pytest.raises(StepError, match=r"nobody answered ask run-7\.human_agent\.\w+ of "
                                        r"'human_agent' within 0.3s"):
        await PromptAgent(id="ask", agent_name="human_agent", timeout_seconds=0.3,
                          prompt="Anyone?").run(ctx)
    assert [a.state for a in asks().all()] == ["expired"]


async def test_a_cancelled_run_cancels_its_ask(desk: TaskContext) -> None:
    ctx = desk
    await DeployHumanAgent(id="human", poll_interval_seconds=0.05, env_ids=["desk"]).run(ctx)
    asking = asyncio.ensure_future(PromptAgent(id="ask", agent_name="human_agent",
                                               prompt="Anyone?").run(ctx))
    while not asks().awaiting():
        await asyncio.sleep(0.05)
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    assert [a.state for a in asks().all()] == ["cancelled"]


def test_bad_keys_are_preflight_problems() -> None:
    from agent_env.api import PreflightView

    view = PreflightView(step_ids=frozenset({"h"}), entities={"envs": frozenset({"desk"})})
    assert DeployHumanAgent(id="h", a2a_url="hub.local").check(view) == [
        "a2a_url must be an http(s) URL, not 'hub.local'"]
    assert "leave env_ids out or a2a_url out" in DeployHumanAgent(
        id="h", a2a_url="http://hub", env_ids=["desk"]).check(view)[0]


async def test_a_remote_human_is_reached_over_a2a(state_root: Any) -> None:
    ctx = TaskContext(task_id="t", instance_id="run-8", artifacts=MemoryArtifacts())
    await DeployHumanAgent(id="human", a2a_url="http://hub.example/a2a").run(ctx)
    assert ctx.outputs["human"] == {"agent_name": "human_agent", "type": "human",
                                    "a2a_url": "http://hub.example/a2a"}

"""The shipped ``model-agent`` through the ``a2a`` agent type, on the real engine.

The echo env of the agents-smoke bundle is deployed by ``deploy_env``; the agent joins its
sandbox next to a ``model-gateway`` container serving the scripted model; the prompt makes it
call ``echo`` through the env's gateway and answer with the result. Images are built once
(content-hash tags: later tests and reruns find them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_env import runtime
from agent_env.tasks.context import TaskContext
from agent_env.tasks.step_types.env_steps import DeployEnv
from agent_env.tasks.steps import InfraError
from agentenv_agents.model_steps import ScriptedModel
from agentenv_agents.steps import DeployAgent, PromptAgent, read_trajectory

pytestmark = pytest.mark.docker
TEXT = "agents smoke 7431"
PROMPT = f"Call the echo tool with the text '{TEXT}' and answer with what it returned."
HERE = Path(__file__).parent
CANARY = "sk-canary-5f1d0c3e9a7b4e21"


SKILL = {"name": "echo-style", "description": "How to report a tool's answer.",
         "skill_md": "# Echo style\nQuote the tool's text exactly."}


async def deploy(ctx: TaskContext, ids: dict[str, str], **agent: Any) -> None:
    await DeployEnv(id="deploy", env_id=ids["echo"], sandbox_type="docker").run(ctx)
    await ScriptedModel(id="model", script_artifact_id=ids["echo_script"]).run(ctx)
    await DeployAgent(id="agent", a2a_agent_id="model-agent", env_ids=[ids["echo"]],
                      **agent).run(ctx)


def containers(client: Any, run_id: str, role: str) -> list[Any]:
    return client.containers.list(filters={"label": [f"agentenv.run={run_id}",
                                                     f"agentenv.role={role}"]})


async def test_the_model_agent_calls_the_echo_env_with_the_scripted_model(
    task: tuple[TaskContext, dict[str, str]], leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = task
    await deploy(ctx, ids, skills=[SKILL])  # a sealed agent takes an inline skill
    described = ctx.outputs["agent"]
    assert described["agent"] == "model-agent" and described["type"] == "a2a"
    assert described["model_gateway"]["upstream"] == "scripted only"
    # its published A2A port wants the deployment's token (the run sends it)
    import aiohttp

    async with aiohttp.ClientSession() as http, http.post(
            described["url"] + "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                                             "params": {"id": "x"}}) as resp:
        assert resp.status == 401

    started = time.monotonic()
    await PromptAgent(id="ask", prompt=PROMPT, model="scripted:echo_script",
                      timeout_seconds=60).run(ctx)
    assert time.monotonic() - started < 10
    reply = ctx.outputs["ask"]
    assert reply["response"] == f"The echo tool returned: {TEXT}"
    assert reply["tool_call_count"] == 1 and reply["error_type"] is None
    assert reply["usage"]["model_calls"] == 2
    assert reply["usage"]["input_tokens"] > 0 and reply["usage"]["output_tokens"] > 0
    # the record keeps the counts (the secret filter drops "token" keys, not "..._tokens")
    assert ctx.strip_secrets(reply)["usage"] == reply["usage"]
    key = reply["agent_trajectory_object_key"]
    assert key == (f"runs/{ctx.instance_id}/prompt_agent_trajectories/prompt_id=ask/"
                   "trajectory-agent.json")
    events = read_trajectory(key)  # kept in the object store, not in the record
    assert reply["trajectory_events"] == len(events)
    tool_calls = [e for e in events if e.get("type") == "tool_call"]
    call_ids = [e.pop("tool_call_id") for e in tool_calls]  # the model's id, for later turns
    assert tool_calls == [{"type": "tool_call", "server": "echo", "tool": "echo",
                           "arguments": {"text": TEXT}, "result": TEXT, "is_error": False}]
    (asked,) = [e for e in events if e.get("type") == "model_call" and e["calls"]]
    assert [c["id"] for c in asked["calls"]] == call_ids and call_ids[0]
    assert events[0] == {"type": "agentenv.format", "format": "agentenv-model-agent/1"}
    # every model call of the prompt, in full, beside the trajectory: this agent's own
    calls = read_trajectory(reply["model_call_log_object_key"])
    assert reply["model_call_log_object_key"] == key.replace("/trajectory-", "/model-calls-")
    assert [(c["caller"], c["model"], c["status"]) for c in calls] == [
        ("agent-agent", "scripted:echo_script", 200)] * 2
    assert calls[0]["request"]["messages"][-1]["content"] == PROMPT
    # the skill given at deploy (skill-config/v1) reached the model in the system prompt
    system = calls[0]["request"]["messages"][0]["content"]
    assert "# Skill: echo-style\nHow to report a tool's answer." in system
    assert "Quote the tool's text exactly." in system
    usage = events[-1]
    assert usage["type"] == "agentenv.usage"
    assert usage["models_answering"] == ["scripted:echo_script"]
    assert usage["usage"] == reply["usage"]

    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


async def test_an_agent_that_dies_mid_prompt_fails_in_seconds(
    task: tuple[TaskContext, dict[str, str]], store_bundle: Any, docker_client: Any,
    run_id: str,
) -> None:
    """The scripted model has the agent call a tool that waits a minute; the agent is killed
    meanwhile: the prompt fails seconds later, naming the container, not at its timeout."""
    ctx, _ = task
    ids, ctx.artifacts = store_bundle(folder=HERE / "bundles" / "slow")
    await DeployEnv(id="deploy", env_id=ids["slow"], sandbox_type="docker").run(ctx)
    await ScriptedModel(id="model", script_artifact_id=ids["wait_script"]).run(ctx)
    await DeployAgent(id="agent", a2a_agent_id="model-agent", env_ids=[ids["slow"]]).run(ctx)
    (agent,) = containers(docker_client, run_id, "agent")
    prompt = asyncio.create_task(PromptAgent(
        id="ask", prompt="wait", model="scripted:wait_script", timeout_seconds=300).run(ctx))
    await asyncio.sleep(1.5)  # the agent now waits on the tool
    assert not prompt.done()
    agent.kill()
    killed = time.monotonic()
    with pytest.raises(InfraError, match=r"(?s)agent 'agent' stopped answering "
                                        r"mid-prompt.*container agent-agent"):
        await prompt
    assert time.monotonic() - killed < 10


async def test_an_agent_without_envs_gets_a_sandbox_of_its_own(
    task: tuple[TaskContext, dict[str, str]], tmp_path: Path, store_bundle: Any,
    leftovers: Callable[[], list[str]],
) -> None:
    import json

    ctx, _ = task
    folder = tmp_path / "hello-bundle"
    (folder / "artifacts" / "hello_script").mkdir(parents=True)
    (folder / "tasks").mkdir()
    (folder / "tasks" / "t.json").write_text(json.dumps([
        {"id": "model", "type": "scripted_model", "script_artifact_id": "hello_script"}]))
    (folder / "artifacts" / "hello_script" / "script.json").write_text(json.dumps(
        {"turns": [{"text": "hello without tools"}]}))
    ids, artifacts = store_bundle(folder=folder)
    ctx.artifacts = artifacts
    await ScriptedModel(id="model", script_artifact_id=ids["hello_script"]).run(ctx)
    await DeployAgent(id="agent", a2a_agent_id="model-agent", sandbox_type="docker").run(ctx)
    assert "agent-agent" in ctx.sandboxes
    await PromptAgent(id="ask", prompt="hi", model="scripted:hello_script").run(ctx)
    assert ctx.outputs["ask"]["response"] == "hello without tools"
    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


@pytest.fixture
def canary_upstream(state_root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """[model] base_url (unreachable) and api_key (the canary), set before the run's stores."""
    monkeypatch.setenv("AGENT_ENV_MODEL_BASE_URL", "http://upstream.invalid/v1")
    monkeypatch.setenv("AGENT_ENV_MODEL_API_KEY", CANARY)
    runtime.reset()
    return CANARY


async def test_the_upstream_key_reaches_only_the_model_gateway(
    canary_upstream: str, task: tuple[TaskContext, dict[str, str]], docker_client: Any,
    run_id: str,
) -> None:
    """[model] api_key is a canary: the model-gateway container holds it; the agent container's
    environment, command and files do not."""
    ctx, ids = task
    await deploy(ctx, ids)
    assert ctx.outputs["agent"]["model_gateway"]["upstream"] == "http://upstream.invalid/v1"

    (gateway,) = containers(docker_client, run_id, "model-gateway")
    assert f"AGENTENV_UPSTREAM_API_KEY={CANARY}" in gateway.attrs["Config"]["Env"]
    (agent,) = containers(docker_client, run_id, "agent")
    config = agent.attrs["Config"]
    seen = " ".join([*(config.get("Env") or []), *(config.get("Cmd") or []),
                     *(config.get("Entrypoint") or []), *(agent.attrs.get("Args") or [])])
    assert CANARY not in seen
    assert "AGENTENV_MODEL_BASE_URL=http://model-gateway:4000/v1" in config["Env"]
    found = agent.exec_run(["sh", "-c", f"grep -rl --exclude-dir=proc --exclude-dir=sys "
                                        f"--exclude-dir=dev {CANARY} / 2>/dev/null; true"])
    assert found.output.decode().strip() == ""
    assert CANARY not in agent.exec_run(["sh", "-c", "cat /proc/1/environ"]).output.decode()
    # The record never shows it either.
    assert CANARY not in str(ctx.strip_secrets(ctx.outputs))

    # A non-scripted model goes to the (unreachable) upstream: the agent reports it, quickly.
    started = time.monotonic()
    with pytest.raises(InfraError, match=r"\(infra_error\): the model upstream answered HTTP 502 "
                                         r"for model gpt-test"):
        await PromptAgent(id="ask", prompt=PROMPT, model="gpt-test", timeout_seconds=60).run(ctx)
    assert time.monotonic() - started < 30
    # the reply is recorded all the same: which error, and the failed model call in its usage
    reply = ctx.outputs["ask"]
    assert reply["error_type"] == "infra_error" and reply["usage"]["model_calls"] == 1


async def test_a_rubric_judge_asks_the_runs_model_gateway(
    task: tuple[TaskContext, dict[str, str]], tmp_path: Path, store_bundle: Any,
) -> None:
    """rubrics_verifier's judge goes through the model gateway the agent uses: a scripted
    judge answers offline, and the gateway's call log keeps the judge's calls (caller
    ``judge``) with their tokens, beside the agent's."""
    import json
    import shutil

    from agent_env.evals.rubrics import RubricsVerifier
    from agentenv_agents.plugin import BUNDLES

    ctx, _ = task
    folder = tmp_path / "bundle"
    shutil.copytree(BUNDLES / "agents-smoke", folder)
    (folder / "artifacts" / "judge_script").mkdir()
    (folder / "artifacts" / "judge_script" / "script.json").write_text(json.dumps({"turns": [
        {"match": {"last_user_contains": TEXT},
         "text": '{"score": 1, "justification": "the reply carries the echoed text"}'}]}))
    ids, ctx.artifacts = store_bundle(folder=folder)
    await deploy(ctx, ids)  # its echo_script is loaded into the gateway when it starts ...
    assert ctx.agents["agent"].gateway.loaded == {"echo_script"}
    # ... and a script set up once the gateway is up is pushed to it
    await ScriptedModel(id="judge", script_artifact_id=ids["judge_script"]).run(ctx)
    assert ctx.agents["agent"].gateway.loaded == {"echo_script", "judge_script"}
    await PromptAgent(id="ask", prompt=PROMPT, model="scripted:echo_script",
                      timeout_seconds=60).run(ctx)
    verifier = RubricsVerifier(id="rubric", prompt_id="ask", judge_model="scripted:judge_script",
                               criteria=[{"criterion": "It reports what echo returned.",
                                          "weight": 2},
                                         {"criterion": "It is one sentence."}])
    await verifier.run(ctx)
    verification = ctx.verifications["rubric"]
    assert verification.score == 1.0
    assert [r.justification for r in verification.results] == [
        "the reply carries the echoed text"] * 2
    gateway = ctx.agents["agent"].gateway
    judged = [c for c in await gateway.calls() if c["caller"] == "judge"]
    assert [(c["model"], c["status"]) for c in judged] == [("scripted:judge_script", 200)] * 2
    assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 for c in judged)

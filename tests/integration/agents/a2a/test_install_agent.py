"""``install_agent`` (install/v1) on the real engine: the shipped model-agent exported from its
image and started inside a task's own container, which has no aiohttp or agent SDK of its own.

The install-demo bundle's workspace image is the base Python image and nothing more; the agent
answers a prompt with the scripted model through the sandbox's model gateway.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_env.tasks.context import TaskContext
from agent_env.tasks.step_types.container_steps import RunDockerContainer
from agent_env.tasks.step_types.sandbox_steps import DeploySandbox
from agent_env.tasks.steps import StepError
from agentenv_agents.install_steps import InstallAgent
from agentenv_agents.model_steps import ScriptedModel
from agentenv_agents.plugin import BUNDLES
from agentenv_agents.steps import PromptAgent, read_trajectory

pytestmark = pytest.mark.docker
DEMO = BUNDLES / "install-demo"
HERE = Path(__file__).parent
TEXT = "install demo 5521"


@pytest.fixture
async def box(state_root: Path, run_id: str,
              store_bundle: Any) -> AsyncIterator[tuple[TaskContext, dict[str, str]]]:
    ids, artifacts = store_bundle(folder=DEMO)
    ctx = TaskContext(task_id="@test/install-demo/t", instance_id=run_id, artifacts=artifacts)
    await DeploySandbox(id="box", sandbox_name="box", sandbox_type="docker").run(ctx)
    yield ctx, ids
    report = await ctx.teardown.run()
    assert report.failed == ()


async def workspace(ctx: TaskContext, ids: dict[str, str], name: str = "workspace",
                    **keys: Any) -> None:
    keys.setdefault("ports", [8000])
    await RunDockerContainer(id=f"run-{name}", sandbox_name="box", container_name=name,
                             docker_context_artifact_id=keys.pop("context", ids["workspace"]),
                             **keys).run(ctx)


def in_container(client: Any, run_id: str, name: str, command: str) -> tuple[int, str]:
    (container,) = client.containers.list(filters={"label": [
        f"agentenv.run={run_id}", "agentenv.role=task-container"]}, all=True)
    assert container.name.endswith(name)
    code, out = container.exec_run(["sh", "-c", command], user="0")
    return code, out.decode()


async def test_the_model_agent_runs_inside_the_task_container(
    box: tuple[TaskContext, dict[str, str]], docker_client: Any, run_id: str,
    leftovers: Callable[[], list[str]],
) -> None:
    ctx, ids = box
    await workspace(ctx, ids)
    # the task's container has no agent: its own Python cannot even import aiohttp
    code, _ = in_container(docker_client, run_id, "workspace", "python3 -c 'import aiohttp'")
    assert code != 0
    await ScriptedModel(id="model", script_artifact_id=ids["install_script"]).run(ctx)
    await InstallAgent(id="install", sandbox_name="box", container_name="workspace",
                       a2a_agent_id="model-agent", workspace_dir="/work").run(ctx)
    out = ctx.outputs["install"]
    assert out["installed"] is True and out["installed_in"] == "workspace"
    assert out["agent"] == "model-agent" and out["card_name"] == "model-agent"
    assert (out["port"], out["python"], out["root"]) == (8000, "3.11", "/opt/agentenv-agent-8000")
    assert out["network_policy"] == "open"  # the container publishes a port: it has a route out
    assert out["url"] == ctx.outputs["run-workspace"]["ports"]["8000"]

    # its process is the container's python3, running the exported agent from the root
    code, text = in_container(docker_client, run_id, "workspace",
                              "pid=$(cat /opt/agentenv-agent-8000/agent.pid); "
                              "cat /proc/$pid/cmdline | tr '\\0' ' '; "
                              "stat -c '%a %U' /opt/agentenv-agent-8000 "
                              "/opt/agentenv-agent-8000/agent.env; readlink /proc/$pid/cwd")
    assert code == 0, text
    # the pid file names the agent's own process, working in workspace_dir
    assert text.startswith("python3 -s /opt/agentenv-agent-8000/app/agent.py"), text
    assert text.split("agent.py", 1)[1].split() == ["700", "root", "600", "root", "/work"], text
    # the export container ran once and stopped; nothing of the agent's own image serves
    (export,) = docker_client.containers.list(all=True, filters={"label": [
        f"agentenv.run={run_id}", "agentenv.role=agent-export"]})
    assert export.status == "exited"

    import aiohttp

    async with aiohttp.ClientSession() as http, http.post(
            out["url"] + "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                                       "params": {"id": "x"}}) as resp:
        assert resp.status == 401  # the installed agent wants the run's token too

    await PromptAgent(id="ask", prompt=f"Quote '{TEXT}'.", model="scripted:install_script",
                      timeout_seconds=60).run(ctx)
    reply = ctx.outputs["ask"]
    assert reply["error_type"] is None and TEXT in reply["response"]
    calls = read_trajectory(reply["model_call_log_object_key"])
    assert [(c["caller"], c["model"], c["status"]) for c in calls] == [
        ("workspace-agent-8000", "scripted:install_script", 200)]
    assert reply["usage"]["model_calls"] == 1

    # the same port cannot take a second agent
    with pytest.raises(StepError, match="port 8000 of 'workspace' already serves agent"):
        await InstallAgent(id="again", sandbox_name="box", container_name="workspace",
                           a2a_agent_id="model-agent", agent_name="second").run(ctx)

    report = await ctx.teardown.run()
    assert report.failed == ()
    assert leftovers() == []


async def test_an_unpublished_port_and_a_container_without_python_are_named(
    box: tuple[TaskContext, dict[str, str]], store_bundle: Any,
) -> None:
    ctx, ids = box
    await workspace(ctx, ids, "closed", ports=[])
    with pytest.raises(StepError, match=r"container 'closed' does not publish port 8000.*"
                                        r"add 8000 to ports of its run_docker_container"):
        await InstallAgent(id="install", sandbox_name="box", container_name="closed",
                           a2a_agent_id="model-agent").run(ctx)
    extra, ctx.artifacts = store_bundle(folder=HERE / "bundles" / "no-python")
    await workspace(ctx, ids, "bare", context=extra["bare"])
    with pytest.raises(StepError, match=r"container 'bare' has no python3.*add python3 "
                                        r"\(3.11 or later\) to the image of 'bare'"):
        await InstallAgent(id="install2", sandbox_name="box", container_name="bare",
                           a2a_agent_id="model-agent", agent_name="other").run(ctx)
    with pytest.raises(StepError, match="no container 'nowhere' was started"):
        await InstallAgent(id="install3", sandbox_name="box", container_name="nowhere",
                           a2a_agent_id="model-agent", agent_name="third").run(ctx)


async def test_an_outside_player_stands_in_and_its_bash_runs_in_the_container(
    state_root: Path, docker_client: Any, tmp_path: Path,
) -> None:
    """The episode API plays install-demo's agent: nothing is installed, and the player's
    ``bash`` runs inside the task's container as root (where the agent would have worked),
    which is what the reference's proxy agent is for. verify_a2a_install, which reads the
    agent's card, is left out: an outside player has none (the episode says so by name)."""
    import json
    import shutil

    from agent_env.task import EpisodeError, EpisodeSpec, Task

    with pytest.raises(EpisodeError, match=r"step 'install_check' \(verify_a2a_install\) "
                                           "works inside agent 'agent'"):
        EpisodeSpec.from_task(Task.get(Task.from_bundle(DEMO, "install").id))
    bundle = tmp_path / "played"
    shutil.copytree(DEMO, bundle)
    path = bundle / "tasks" / "install.json"
    path.write_text(json.dumps([s for s in json.loads(path.read_text())
                                if s["type"] != "verify_a2a_install"]))
    task = Task.get(Task.from_bundle(bundle, "install").id)
    episode = await EpisodeSpec.from_task(task, turn_timeout=120).start()
    turn = await episode.next_turn()
    assert turn is not None and turn.agent == "agent"
    async with turn.tools() as tools:
        listed = [t["name"] for t in tools.list()]
        assert listed == ["bash"]
        done = await tools.call("bash", {"command": "cat /work/README.txt; id -u; "
                                                    "ls /opt | grep -c agentenv-agent || true"})
    text = done["content"][0]["text"]
    # the container's own file, uid 0, and no agent under /opt
    assert text == "the task's files\n0\n0\n(exit 0)", text
    await turn.end(response=f"From the player: {TEXT}")
    assert await episode.next_turn() is None
    scores = await episode.result()
    assert scores == {"answer": 1.0, "inside": 0.0}  # nothing was installed: no agent.pid

"""deploy_agent finds an agent folder by id and deploys it through the type its agent.toml names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from agent_env.agents import AgentReply
from agent_env.contributions import AgentSource, Lazy
from agent_env.errors import MissingPluginError, UserError
from agent_env.hookspecs import hookimpl
from agent_env.plugins import BUILTIN_PLUGINS, PluginHost, PluginRecord
from agent_env.runtime import Runtime, use
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.steps import RunChoices
from agentenv_agents.definitions import read_agent
from agentenv_agents.steps import DeployAgent, PromptAgent

DEPLOYED: list[tuple[str, str, dict[str, str]]] = []


@attrs.define
class ShoutingAgent:
    """A test double of a deployed agent: answers in capitals, no model."""

    name: str

    async def prompt(self, step: PromptAgent, timeout: float) -> AgentReply:
        return AgentReply(step.prompt.upper())

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name, "type": "shout"}


class ShoutType:
    name = "shout"

    @staticmethod
    async def deploy(ctx: TaskContext, step: DeployAgent, setup: Any, source: Any) -> Any:
        DEPLOYED.append((step.agent_name, source.name, source.default_env_vars))
        return ShoutingAgent(step.agent_name)


def runtime_with_toy(folder: Path) -> Runtime:
    class Toy:
        @hookimpl
        def agent_env_agent_types(self) -> list[Any]:
            return [ShoutType]

        @hookimpl
        def agent_env_agents(self) -> list[AgentSource]:
            return [AgentSource("shouter", folder, aliases=("loud",))]

    host = PluginHost(builtin=BUILTIN_PLUGINS, discover=False)
    host.load()
    record = PluginRecord("toy", "toy-agents", "1.0", "toy")
    host.records.append(record)
    host._register(record, Toy())
    return Runtime(host=host)


def agent_folder(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "shouter"
    folder.mkdir()
    (folder / "agent.toml").write_text(text)
    return folder


async def test_an_agent_is_deployed_by_its_type_and_prompted(tmp_path: Path) -> None:
    folder = agent_folder(tmp_path, 'type = "shout"\n[default_env_vars]\nLOUD = "yes"\n')
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    with use(runtime_with_toy(folder)):
        await DeployAgent(id="d", agent_name="bob", a2a_agent_id="loud").run(ctx)
        await PromptAgent(id="p", agent_name="bob", prompt="hello").run(ctx)
    assert DEPLOYED[-1] == ("bob", "shouter", {"LOUD": "yes"})
    assert ctx.outputs["p"]["response"] == "HELLO"
    assert ctx.outputs["d"] == {"agent_name": "bob", "type": "shout"}


async def test_an_agent_whose_type_nobody_provides_says_so(tmp_path: Path) -> None:
    folder = agent_folder(tmp_path, 'type = "a2a"\n')
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    with use(runtime_with_toy(folder)), pytest.raises(
            MissingPluginError, match=r"the 'a2a' agent type comes from the agents plugin, which "
            r"is not installed \(pip install 'agentenv-framework\[agents\]'\)"):
        await DeployAgent(id="d", a2a_agent_id="shouter").run(ctx)
    (folder / "agent.toml").write_text('type = "telepathy"\n')
    with use(runtime_with_toy(folder)), pytest.raises(
            MissingPluginError, match=r"no agent type named 'telepathy' \(installed: shout\)"):
        await DeployAgent(id="d", a2a_agent_id="shouter").run(ctx)


@pytest.mark.parametrize(("text", "message"), [
    ('typ = "a2a"\n', r"unknown key\(s\) typ"),
    ('[metadata]\ncolour = "red"\n', r"\[metadata\] takes only"),
    ("[default_env_vars]\nN = 1\n", r"\[default_env_vars\] must map names to strings"),
    ("type = [\n", r"invalid TOML"),
])
def test_a_bad_agent_toml_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        read_agent("shouter", agent_folder(tmp_path, text))


def test_agent_types_may_be_lazy(tmp_path: Path) -> None:
    class LazyToy:
        @hookimpl
        def agent_env_agent_types(self) -> list[Lazy]:
            return [Lazy("shout", f"{__name__}:ShoutType")]

    host = PluginHost(builtin=(), discover=False)
    host.load()
    record = PluginRecord("lazy", "toy-lazy", "1.0", "lazy")
    host.records.append(record)
    host._register(record, LazyToy())
    assert host.lookup("agent_type", "shout") is ShoutType


@attrs.define
class ModelEcho:
    """A test double of a deployed agent: answers with the model its prompt step asked for."""

    name: str

    async def prompt(self, step: PromptAgent, timeout: float) -> AgentReply:
        return AgentReply(f"model={step.model}")

    def describe(self) -> dict[str, Any]:
        return {"agent_name": self.name}


class ModelEchoType:
    name = "model-echo"

    @staticmethod
    async def deploy(ctx: TaskContext, step: DeployAgent, setup: Any, source: Any) -> Any:
        DEPLOYED.append((step.agent_name, source.name, {}))
        return ModelEcho(step.agent_name)


async def test_run_overrides_replace_the_steps_agent_and_model(tmp_path: Path) -> None:
    folder = agent_folder(tmp_path, 'type = "model-echo"\n')

    class Toy:
        @hookimpl
        def agent_env_agent_types(self) -> list[Any]:
            return [ModelEchoType]

        @hookimpl
        def agent_env_agents(self) -> list[AgentSource]:
            return [AgentSource("echoer", folder)]

    host = PluginHost(builtin=BUILTIN_PLUGINS, discover=False)
    host.load()
    record = PluginRecord("toy", "toy-agents", "1.0", "toy")
    host.records.append(record)
    host._register(record, Toy())
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts(),
                      choices=RunChoices(agent="echoer", model="from-the-cli"))
    with use(Runtime(host=host)):  # the step names another agent and model: the run's win
        await DeployAgent(id="d", agent_name="eve", a2a_agent_id="shouter").run(ctx)
        await PromptAgent(id="p", agent_name="eve", prompt="hi", model="from-step").run(ctx)
    assert DEPLOYED[-1][:2] == ("eve", "echoer")
    assert ctx.outputs["p"]["response"] == "model=from-the-cli"


def test_a_folder_with_only_a_dockerfile_is_an_a2a_agent(tmp_path: Path) -> None:
    """As the reference's agent folders are: no agent.toml, every default."""
    folder = tmp_path / "gemini"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM python:3.11-slim\n")
    definition = read_agent("gemini", folder)
    assert (definition.type, definition.dockerfile, definition.image) == ("a2a", "Dockerfile",
                                                                          None)
    (folder / "Dockerfile").unlink()
    with pytest.raises(UserError, match=r"has no agent.toml \(nor a Dockerfile\)"):
        read_agent("gemini", folder)

"""What a run serves while up: envs register their gateway URL and token, agent types add
theirs, and ``run --keep`` prints every one, once per URL; records never carry the token."""

from __future__ import annotations

import attrs

from agent_env.runs import endpoint_lines
from agent_env.tasks.artifacts import MemoryArtifacts
from agent_env.tasks.context import TaskContext
from agent_env.tasks.teardown import Teardown


@attrs.frozen
class Deployed:
    url: str
    token: str = attrs.field(repr=False)


def test_envs_and_agents_are_listed_once_per_url_with_their_tokens() -> None:
    teardown = Teardown()
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts(),
                      teardown=teardown)
    shared = Deployed("http://127.0.0.1:5000", "tok-env-1234")
    ctx.add_env("echo", shared)
    ctx.add_env("mail", shared)  # deployed together: one gateway, listed once
    ctx.add_endpoint("agent 'a' (model-agent), A2A", "http://127.0.0.1:6000", "tok-agent-5678")
    assert endpoint_lines(teardown.endpoints) == [
        "  [t] env echo gateway (MCP at /mcp): http://127.0.0.1:5000  "
        "(Authorization: Bearer tok-env-1234)",
        "  [t] agent 'a' (model-agent), A2A: http://127.0.0.1:6000  "
        "(Authorization: Bearer tok-agent-5678)",
    ]
    ctx.register_secret("tok-env-1234")
    assert "tok-env-1234" not in str(ctx.snapshot())


def test_a_deployment_without_a_url_is_not_an_endpoint() -> None:
    ctx = TaskContext(task_id="t", instance_id="t-1", artifacts=MemoryArtifacts())
    ctx.add_env("box", object())
    assert ctx.teardown.endpoints == []

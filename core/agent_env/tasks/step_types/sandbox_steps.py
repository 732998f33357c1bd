"""``deploy_sandbox`` brings a bare sandbox up; ``teardown_sandboxes`` takes some down early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from agent_env.tasks.steps import PreflightView, Step

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext

DEFAULT_SANDBOX_NAME = "sandbox"


@attrs.define(kw_only=True)
class DeploySandbox(Step):
    """A sandbox of ``sandbox_type`` (a provider name or a fallback chain ``a,b``)."""

    type = "deploy_sandbox"

    sandbox_name: str = DEFAULT_SANDBOX_NAME
    sandbox_mode: str = "vm"
    sandbox_type: str | None = None
    image: str | None = None
    port: int | None = None
    exposed_ports: list[int] | None = None
    cpu: float | None = None
    memory_mb: int | None = None
    disk_size_gb: float | None = None
    ttl_seconds: int | None = None
    boot_mode: str | None = None
    env_vars: dict[str, str] = attrs.field(factory=dict)
    network_policy: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.sandbox_mode not in ("vm", "container"):
            problems.append(f"sandbox_mode must be 'vm' or 'container', not '{self.sandbox_mode}'")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agent_env.sandbox.base import SandboxSpec

        ports = [*(self.exposed_ports or []), *([self.port] if self.port else [])]
        spec = SandboxSpec(
            name=self.sandbox_name,
            mode=self.sandbox_mode,
            image=self.image,
            cpu=self.cpu,
            memory_mb=self.memory_mb,
            disk_mb=int(self.disk_size_gb * 1024) if self.disk_size_gb else None,
            ttl_seconds=self.ttl_seconds,
            ports=tuple(ports),
            env_vars=dict(self.env_vars),
            labels={"agentenv.step": self.id},
        )
        for value in self.env_vars.values():
            if _looks_secret(value):
                ctx.register_secret(value)
        await ctx.create_sandbox(spec, self.sandbox_type)


def _looks_secret(value: str) -> bool:
    return len(value) >= 16 and not any(c.isspace() for c in value)


@attrs.define(kw_only=True)
class TeardownSandboxes(Step):
    """Best effort: take sandboxes down now; a failure is reported, never fails the task."""

    type = "teardown_sandboxes"
    example = {'id': 'done', 'type': 'teardown_sandboxes', 'sandbox_names': ['box']}

    fail_task_on_error: bool = False
    sandbox_names: list[str] | None = None
    agent_names: list[str] | None = None
    env_ids: list[str] | None = None

    async def run(self, ctx: TaskContext) -> None:
        names = self.sandbox_names if self.sandbox_names is not None else list(ctx.sandboxes)
        left = [name for name in names if not await ctx.tear_down_sandbox(name)]
        for env_id in self.env_ids or ():
            ctx.envs.pop(env_id, None)
        if left:
            from agent_env.logs import get_logger

            get_logger("tasks").warning("sandboxes left up", step=self.id, sandboxes=left)

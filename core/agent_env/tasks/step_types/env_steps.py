"""``deploy_env``: deploy a stored env through whichever plugin registered its type.

The step is the kernel's so that every env type deploys the same way: the env's stored source
says its ``type``, the env-type registry (``agent_env_env_types``) says who deploys it, and the
sandbox-provider contract says where (see :mod:`agent_env.env_types`). ``sandbox_type`` names
the provider; ``local`` (what task files written for "this machine" say) is read as ``docker``,
since envs are container images and the local folder sandbox cannot run them. ``with_envs``
deploys more envs of the bundle into the same deployment when their type supports it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import attrs

from agent_env.env_types import (
    DEFAULT_READY_TIMEOUT,
    DEFAULT_TTL_SECONDS,
    EnvType,
    env_provider_chain,
    load_env_source,
)
from agent_env.tasks.steps import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.tasks.context import TaskContext


@attrs.define(kw_only=True)
class DeployEnv(Step):
    """Deploy a stored env (its type decides how) in a sandbox of its own."""

    type = "deploy_env"
    entity_fields = {"env_id": "envs", "with_envs": "envs"}
    version_fields = {"env_version": "env_id"}

    env_id: str
    env_version: int | None = None
    #: Ours: more envs deployed into the same deployment (their latest stored versions).
    with_envs: list[str] = attrs.field(factory=list)
    sandbox_type: str | None = None
    ttl_seconds: int | None = None
    cpu: float | None = None
    memory_mb: int | None = None
    #: Ours: how long the env may take to become ready (default 120 s).
    ready_timeout_seconds: float | None = None

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        if self.ttl_seconds is not None and self.ttl_seconds <= 0:
            problems.append("ttl_seconds must be positive")
        if self.ready_timeout_seconds is not None and self.ready_timeout_seconds <= 0:
            problems.append("ready_timeout_seconds must be positive")
        if isinstance(self.with_envs, str) or not all(
                isinstance(e, str) for e in self.with_envs):
            problems.append("with_envs must be a list of env ids")
        elif self.env_id in self.with_envs or len(set(self.with_envs)) < len(self.with_envs):
            problems.append("with_envs must name other envs, each once")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agent_env.runtime import current
        from agent_env.sandbox.base import SandboxSpec
        from agent_env.tasks.sandboxes import choose_provider, open_provider

        source = await asyncio.to_thread(load_env_source, ctx.artifacts, self.env_id,
                                         self.env_version)
        env_type = current().host.registry("env_type").get(source.type)
        if env_type is None:
            raise StepError(f"env '{self.env_id}' has type '{source.type}', which no installed "
                            "plugin provides")
        env: EnvType = env_type.from_spec(source, ctx.artifacts)
        if self.with_envs:
            companions = await asyncio.gather(*(
                asyncio.to_thread(load_env_source, ctx.artifacts, env_id)
                for env_id in self.with_envs))
            other = [c.id for c in companions if c.type != source.type]
            if other:
                raise StepError(f"with_envs: envs deployed together must all be of type "
                                f"'{source.type}' (not: {', '.join(other)})")
            env = env.with_companions(companions)
        ttl = int(self.ttl_seconds or DEFAULT_TTL_SECONDS)
        name = f"env-{source.name}"
        spec = SandboxSpec(
            name=name, mode="vm", cpu=self.cpu, memory_mb=self.memory_mb, ttl_seconds=ttl,
            labels={**ctx.labels, "agentenv.step": self.id},
        )
        if name in ctx.sandboxes:
            raise StepError(f"env '{self.env_id}' is already deployed in this task")
        provider = open_provider(choose_provider(env_provider_chain(ctx, self.sandbox_type)))
        sandbox = await provider.create(spec)
        ctx.add_sandbox(name, sandbox)  # from here on, teardown takes it down whatever happens
        try:
            deployed = await env.deploy(
                ctx, sandbox, ttl_seconds=ttl,
                ready_timeout=float(self.ready_timeout_seconds or DEFAULT_READY_TIMEOUT),
                progress=ctx.note,
            )
        except BaseException:
            await asyncio.shield(ctx.tear_down_sandbox(name))  # a failed deploy leaves nothing
            raise
        for env_id in (self.env_id, *self.with_envs):
            ctx.add_env(env_id, deployed)
        ctx.outputs[self.id] = deployed.step_output()

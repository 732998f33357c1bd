"""``deploy_env``: deploy a stored env through whichever plugin registered its type.

The step is the kernel's so that every env type deploys the same way: the env's stored source
says its ``type``, the env-type registry (``agent_env_env_types``) says who deploys it, and the
sandbox-provider contract says where (see :mod:`agent_env.env_types`). ``sandbox_type`` names
the provider; ``local`` (what task files written for "this machine" say) is read as ``docker``,
since envs are container images and the local folder sandbox cannot run them. ``with_envs``
deploys more envs of the bundle into the same deployment when their type supports it.

Keys task files written for other tools carry are read, each with its behaviour or, where no
provider or env type here can honour the value, a preflight problem that says why:
``gateway_mode`` (the gateway runs calls side by side or one at a time), ``metadata`` (kept in
the step's output, so the run record has it), ``disk_size_gb`` (only its default: no provider
here sizes an env's disk), ``env_state_type`` (a state store deployed beside the env for this
run, by env types that back that type: :attr:`EnvType.env_state_types`),
``env_state_instance_id`` (a durable state, ``agent-env env init-env-state``, attached instead:
see :mod:`agent_env.env_state`) and ``artifact_id``/``artifact_version`` (unset: no env type
here takes an artifact at deploy; ``load_artifact`` loads one).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.env_types import (
    DEFAULT_DISK_SIZE_GB,
    DEFAULT_ENV_TYPE,
    DEFAULT_GATEWAY_MODE,
    DEFAULT_READY_TIMEOUT,
    DEFAULT_TTL_SECONDS,
    GATEWAY_MODES,
    EnvType,
    env_provider_chain,
    load_env_source,
    network_policy_problem,
)
from agent_env.tasks.steps import ChoiceProblem, PreflightView, RunChoices, Step, StepError

#: How a durable env state instance's id starts (agent_env.env_state, imported when used).
ESI_PREFIX = "esi-"

if TYPE_CHECKING:
    from agent_env.env_state import EnvStateChoice
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
    #: ``performance`` (tool calls side by side) or ``consistent`` (one at a time).
    gateway_mode: str = DEFAULT_GATEWAY_MODE
    #: Kept in the step's output (and so in the run record) as given.
    metadata: dict[str, Any] = attrs.field(factory=dict)
    disk_size_gb: float = DEFAULT_DISK_SIZE_GB
    env_state_type: str | None = None
    env_state_instance_id: str | None = None
    artifact_id: str | None = None
    artifact_version: int | None = None
    #: Ours: what the env's servers may reach outside (``none`` or ``open``), over its
    #: ``env.toml``'s and ``[envs] network_policy``.
    network_policy: str | None = None
    #: Ours: deploy from this snapshot (``agent-env env snapshot``): each container starts from
    #: its saved image (see :mod:`agent_env.env_snapshots`).
    snapshot_id: str | None = None

    def needs(self, choices: RunChoices) -> list[str]:
        """``--gateway-env-id`` must name a stored env of a gateway type, and
        ``--service-db-env-id`` one of a store type."""
        problems: list[str] = []
        for option, env_id, role in (("--gateway-env-id", choices.gateway_env, "gateway"),
                                     ("--service-db-env-id", choices.service_db_env, "store")):
            problem = stored_env_problem(env_id, role) if env_id else None
            if problem:
                problems.append(ChoiceProblem(f"{option} {env_id}: {problem}"))
        return problems

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
        return problems + self.unsupported()

    def unsupported(self) -> list[str]:
        """The keys set to a value no provider or env type here can honour, each with why."""
        problems = []
        if self.gateway_mode not in GATEWAY_MODES:
            problems.append(f"gateway_mode must be one of {', '.join(GATEWAY_MODES)}, not "
                            f"{self.gateway_mode!r}")
        if not isinstance(self.metadata, dict):
            problems.append("metadata must be an object")
        size = self.disk_size_gb
        if isinstance(size, bool) or not isinstance(size, int | float) or size <= 0:
            problems.append(f"disk_size_gb must be a positive number, not {size!r}")
        elif size != DEFAULT_DISK_SIZE_GB:
            problems.append(f"disk_size_gb {size:g}: no sandbox provider here sizes an env's "
                            f"disk (an env uses its sandbox's); leave it at "
                            f"{DEFAULT_DISK_SIZE_GB:g} or out")
        for key in ("env_state_type", "env_state_instance_id"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                problems.append(f"{key} must be a name, not {value!r}")
        if isinstance(self.env_state_type, str) and self.env_state_type.strip():
            known = installed_env_state_types()
            if self.env_state_type not in known:
                problems.append(f"env_state_type {self.env_state_type!r}: no installed env type "
                                f"backs such an env state (installed: "
                                f"{', '.join(known) or 'none'})")
        instance = self.env_state_instance_id
        if isinstance(instance, str) and not instance.startswith(ESI_PREFIX):
            problems.append(f"env_state_instance_id {instance!r} is not an env state instance "
                            f"id ({ESI_PREFIX}..., as agent-env env init-env-state prints)")
        policy = network_policy_problem(self.network_policy)
        if policy:
            problems.append(policy)
        if self.artifact_id is not None or self.artifact_version is not None:
            problems.append("artifact_id: no env type here takes an artifact at deploy; load "
                            f"it with a load_artifact step (env_id '{self.env_id}') after "
                            "this one")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        from agent_env.runtime import current
        from agent_env.sandbox.base import SandboxSpec
        from agent_env.tasks.sandboxes import choose_provider, create_in_chain

        source = await asyncio.to_thread(load_env_source, ctx.artifacts, self.env_id,
                                         self.env_version)
        env_type = current().host.registry("env_type").get(source.type)
        if env_type is None:
            raise StepError(f"env '{self.env_id}' has type '{source.type}', which no installed "
                            "plugin provides")
        env: EnvType = env_type.from_spec(source, ctx.artifacts)
        snapshot = await asyncio.to_thread(self.snapshot)
        state = await asyncio.to_thread(self.env_state, env_type)
        if state is not None and ctx.choices.service_db_env:
            state = attrs.evolve(state, store_env=ctx.choices.service_db_env)
        if state is None and snapshot is not None and snapshot.env_state_type:
            from agent_env.env_state import EnvStateChoice

            state = EnvStateChoice(snapshot.env_state_type)  # its store is in the snapshot
        if self.network_policy and not env_type.takes_network_policy:
            raise StepError(f"network_policy: envs of type '{env_type.name}' take no network "
                            "policy")
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
        provider_name = choose_provider(env_provider_chain(ctx, self.sandbox_type))
        if state is not None and state.instance is not None and \
                state.instance.provider != provider_name:
            raise StepError(f"env_state_instance_id {state.instance.instance_id} keeps its data "
                            f"on the '{state.instance.provider}' sandbox provider; deploy there "
                            f"(sandbox_type '{state.instance.provider}'), not on "
                            f"'{provider_name}'")
        if snapshot is not None and snapshot.provider != provider_name:
            raise StepError(f"snapshot_id {snapshot.snapshot_id} was saved on the "
                            f"'{snapshot.provider}' sandbox provider; deploy there, not on "
                            f"'{provider_name}'")
        # a snapshot or a kept state pins the provider; otherwise the chain falls through
        pinned = (state is not None and state.instance is not None) or snapshot is not None
        chain = env_provider_chain(ctx, self.sandbox_type)
        sandbox, passed_over = await create_in_chain(
            [provider_name] if pinned else chain[chain.index(provider_name):], spec,
            note=ctx.note)
        # from here on, teardown takes it down whatever happens
        ctx.add_sandbox(name, sandbox, passed_over)
        try:
            if snapshot is not None:
                sandbox.start_from_committed(snapshot.images)
            deployed = await env.deploy(
                ctx, sandbox, ttl_seconds=ttl,
                ready_timeout=float(self.ready_timeout_seconds or DEFAULT_READY_TIMEOUT),
                progress=ctx.note, gateway_mode=self.gateway_mode,
                **({"env_state": state} if state is not None else {}),
                **({"network_policy": self.network_policy} if self.network_policy else {}),
            )
            if snapshot is not None:
                stale = sorted(i.container for i in snapshot.images
                               if i.ref not in sandbox.started_from_committed())
                if stale:
                    raise StepError(f"snapshot {snapshot.snapshot_id} is stale: "
                                    f"{', '.join(stale)} did not start from it (the env changed "
                                    "since it was saved); save a new one with agent-env env "
                                    "snapshot")
        except BaseException:
            await asyncio.shield(ctx.tear_down_sandbox(name))  # a failed deploy leaves nothing
            raise
        for env_id in (self.env_id, *self.with_envs):
            ctx.add_env(env_id, deployed)
        watch = getattr(deployed, "watch", None)
        if watch is not None:  # a server that exits mid-run ends the run at once, as infra's
            name = getattr(deployed, "environment_name", None) or self.env_id.rsplit("/")[-1]
            ctx.watch(f"env {name}", watch(), sandbox)
        ctx.outputs[self.id] = deployed.step_output()
        if self.metadata:
            ctx.outputs[self.id]["metadata"] = dict(self.metadata)


    def snapshot(self) -> Any:
        """The snapshot this deploy starts from, checked against its env; None without one."""
        if not self.snapshot_id:
            return None
        from agent_env.env_snapshots import env_snapshots

        found = env_snapshots().get(self.snapshot_id)
        if found is None:
            raise StepError(f"snapshot_id {self.snapshot_id}: no such snapshot (save one with "
                            "agent-env env snapshot --instance-id ID)")
        if found.env_id != self.env_id:
            raise StepError(f"snapshot_id {self.snapshot_id} is of env '{found.env_id}', not "
                            f"'{self.env_id}'")
        return found

    def env_state(self, env_type: Any) -> EnvStateChoice | None:
        """The env state this deploy asked for, checked against the env type and the durable
        instance's record; None when it asked for none."""
        from agent_env.env_state import EnvStateChoice, env_states

        state_type, instance = self.env_state_type, None
        if self.env_state_instance_id:
            instance = env_states().get(self.env_state_instance_id)
            if instance is None:
                raise StepError(f"env_state_instance_id {self.env_state_instance_id}: no such "
                                "env state instance (make one with agent-env env "
                                "init-env-state)")
            if instance.expired():
                raise StepError(f"env_state_instance_id {instance.instance_id} expired at "
                                f"{instance.expires_at:%Y-%m-%d %H:%M} UTC (make a new one with "
                                "agent-env env init-env-state)")
            if state_type and state_type != instance.state_type:
                raise StepError(f"env_state_instance_id {instance.instance_id} is of type "
                                f"'{instance.state_type}', not env_state_type '{state_type}'")
            if instance.env_id != self.env_id:
                raise StepError(f"env_state_instance_id {instance.instance_id} was made for env "
                                f"'{instance.env_id}', not '{self.env_id}'")
            state_type = instance.state_type
        if not state_type:
            return None
        if state_type not in env_type.env_state_types:
            backs = ", ".join(env_type.env_state_types) or "none"
            raise StepError(f"env_state_type '{state_type}': envs of type '{env_type.name}' "
                            f"back no such env state (they back: {backs})")
        return EnvStateChoice(state_type, instance)


def installed_env_state_types() -> list[str]:
    """Every env state type an installed env type backs (imports the env types: asked only
    when a step names one)."""
    from agent_env.runtime import current

    registry = current().host.registry("env_type")
    return sorted({kind for name in registry for kind in registry[name].env_state_types})


#: What a run may name a stored env to stand in for: how to store one, and the type that does.
_STAND_INS = {"gateway": ("agent-env env gateway put", "a gateway type (gateway_server)"),
              "store": ("agent-env env service-db put", "an env state store type (service_db)")}


def stored_env_problem(env_id: str, role: str) -> str | None:
    """Why the stored env ``env_id`` cannot stand in for the built-in ``role`` (``gateway``:
    :attr:`EnvType.is_gateway`; ``store``: :attr:`EnvType.serves_env_state`), or None."""
    from agent_env.runtime import current

    how, kind_named = _STAND_INS[role]
    record = current().versioned_store.get("envs", env_id)
    if record is None:
        return f"no env '{env_id}' is stored (store one with {how})"
    kind = str(record.body.get("type") or DEFAULT_ENV_TYPE)
    env_type = current().host.registry("env_type").get(kind)
    fits = env_type is not None and (env_type.is_gateway if role == "gateway"
                                     else bool(env_type.serves_env_state))
    if not fits:
        return f"env '{env_id}' is of type '{kind}', not {kind_named}"
    return None

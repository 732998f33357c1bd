"""``agent-env env``: deploy a stored env on its own, list, inspect and tear down; env types add
their own commands here (``env mcp-server put/validate`` from the ``mcp_server`` type, see
:meth:`agent_env.env_types.EnvType.command`).

``env deploy`` brings a stored env up behind its gateway and exits; the deployment lives until
its TTL or ``env teardown``. It goes through the ``deploy_env`` step type, the one place that
turns a stored env into a running one (its env type, the sandbox provider chain, the gateway),
so an env deploys the same way here as in a task. The sandbox carries
:data:`agent_env.deployments.DEPLOYMENT_LABEL` and the deployment is recorded in the
deployments ledger, which ``env list``/``get-instance``/``teardown`` read and ``agent-env gc``
enforces (a live one is kept, an expired one removed). The token is printed once, with the
ready-to-paste client configs the env type gives (``EnvDeployment.client_configs``); it is never
stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID, TTL_SECONDS, VERSION
from agent_env.errors import UserError
from agent_env.sandbox.chain import option_chain

#: ``env deploy``'s default TTL: the env-type contract's (``agent_env.env_types``), written out
#: so that CLI start does not import the contract; a unit test holds the two equal.
DEFAULT_TTL_SECONDS = 10800


class EnvGroup(click.Group):
    """``env``: its own commands, then those the installed env types add (imported only when
    one is run or the group's help lists them)."""

    def _type_commands(self) -> dict[str, click.Command]:
        from agent_env.runtime import current

        found: dict[str, click.Command] = {}
        registry = current().host.registry("env_type")
        for name in registry:
            try:
                offered = registry[name].command()
            except Exception:  # one broken env type must not hide the others' commands
                continue
            for command in offered if isinstance(offered, (list, tuple)) else [offered]:
                if command is not None and command.name:
                    found.setdefault(command.name, command)
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._type_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self._type_commands().get(cmd_name)


@click.group("env", cls=EnvGroup)
def env() -> None:
    """Envs: deploy on their own, list, get-instance, teardown (and register: mcp-server put)."""


# -- deploy ---------------------------------------------------------------------------------------


#: How ``env deploy`` names the URLs a deployment gives (others: capitalised).
URL_NAMES = {"mcp": "MCP", "db_mcp": "DB MCP"}


#: ``env deploy`` options that are ``deploy_env`` keys of the same name.
DEPLOY_KEYS = ("gateway_mode", "cpu", "memory_mb", "disk_size_gb", "env_state_type",
               "env_state_instance_id", "network_policy", "snapshot_id")


def _deploy_step(record: Any, ttl: int, options: dict[str, Any]) -> Any:
    """The ``deploy_env`` step ``env deploy`` runs; a value it cannot honour is one ``Error:``
    line naming the option, before anything starts."""
    from agent_env.bundles.plan import step_registry
    from agent_env.tasks.steps import structure_step

    raw = {"id": "deploy", "type": "deploy_env", "env_id": record.id,
           "env_version": record.version, "ttl_seconds": ttl,
           **{key: value for key, value in options.items() if value is not None}}
    try:
        step: Any = structure_step(step_registry()["deploy_env"], raw)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    problems = step.unsupported()
    if problems:
        first = problems[0]
        key = next((k for k in DEPLOY_KEYS if first.startswith(k)), None)
        raise UserError(f"--{key.replace('_', '-')}{first[len(key):]}" if key else first)
    return step


async def _deploy(record: Any, ttl: int, chain: list[str] | None, step: Any,
                  gateway: str | None = None,
                  service_db: str | None = None) -> tuple[Any, Any]:
    """Run the ``deploy_env`` step in a context of its own and keep what it brought up.

    Returns (ledger record, the env type's deployment object). On any failure everything the
    step brought up is taken down and nothing is recorded."""
    import asyncio
    import datetime as dt
    import secrets

    from agent_env.bundles.entities import stored_artifacts
    from agent_env.deployments import DEPLOYMENT_LABEL, Deployment, deployments, utc_now
    from agent_env.sandbox.base import SandboxError
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.steps import RunChoices, StepError

    # the reference's shape, <env>-<8 random>; chosen here so the sandbox carries it as its
    # DEPLOYMENT_LABEL from the start (docker ps --filter label=agentenv.deployment=<id>)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    slug = re.sub(r"[^a-z0-9-]+", "-", record.id.rsplit("/", 1)[-1].lower()).strip("-")
    deploy_id = f"{slug or 'env'}-{''.join(secrets.choice(alphabet) for _ in range(8))}"
    ctx = TaskContext(task_id=f"env deploy {record.id}", instance_id=deploy_id,
                      artifacts=stored_artifacts(), choices=RunChoices(gateway_env=gateway,
                                                                  service_db_env=service_db),
                      sandbox_chain=chain, labels={DEPLOYMENT_LABEL: deploy_id})
    ctx.note_sink = lambda line: echo(line, err=True)
    created = utc_now()
    try:
        await step.run(ctx)
        deployed = ctx.env(record.id)
        (sandbox,) = ctx.sandboxes.values()
        expires = deployed.expires_at or created + dt.timedelta(seconds=ttl)
        entry = Deployment(
            instance_id=deploy_id, kind="env",
            entity_id=record.id, entity_version=record.version,
            provider=sandbox.provider_name, sandbox_id=sandbox.id,
            urls=deployed.urls(), created_at=created, expires_at=expires,
            env_state_type=(getattr(deployed, "env_state", None) or {}).get("type"),
        )
        deployments().add(entry)
    except BaseException as exc:
        await asyncio.shield(ctx.teardown.run())  # a failed deploy leaves nothing
        if isinstance(exc, StepError | SandboxError):
            raise UserError(f"deploying env '{record.id}' v{record.version} failed: "
                            f"{exc}") from None
        raise
    return entry, deployed


@env.command("deploy")
@click.option("--id", "env_id", type=ENTITY_ID, required=True,
              help="The stored env's id.")
@click.option("--version", type=VERSION, help="A version (default: the latest).")
@click.option("--ttl-seconds", type=TTL_SECONDS, default=DEFAULT_TTL_SECONDS,
              show_default=True, help="Remove it after this long (agent-env gc does).")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
@click.option("--gateway-mode", type=click.Choice(["performance", "consistent"]),
              default="performance", show_default=True,
              help="performance: tool calls side by side; consistent: one at a time.")
@click.option("--cpu", type=float, help="CPUs for its sandbox.")
@click.option("--memory-mb", type=int, help="Memory for its sandbox.")
@click.option("--disk-size-gb", type=float, default=10.0, show_default=True,
              help="Its disk (no provider here sizes one: only the default is taken).")
@click.option("--env-state-type", metavar="TYPE",
              help="A state store deployed beside the env for it (local_postgres).")
@click.option("--env-state-instance-id", metavar="ID",
              help="A durable env state to attach (env init-env-state).")
@click.option("--from-snapshot", "snapshot_id", metavar="ID",
              help="Start each container from a snapshot env snapshot saved.")
@click.option("--network-policy", metavar="POLICY",
              help="What the env's servers may reach outside: none or open (default: its "
                   "env.toml's, else [envs] network_policy, else none).")
@click.option("--gateway", "--gateway-env-id", "gateway", type=ENTITY_ID, metavar="ID",
              help="A stored gateway env (env gateway put) to deploy behind, instead of the "
                   "built-in gateway.")
@click.option("--service-db", "service_db", type=ENTITY_ID, metavar="ID",
              help="A stored env state store (env service-db put) the env state runs, instead "
                   "of the env type's own.")
@click.option("--json", "as_json", is_flag=True, help="Print the deployment as JSON.")
def deploy(env_id: str, version: int | None, ttl_seconds: int, sandbox: str | None,
           gateway_mode: str, cpu: float | None, memory_mb: int | None, disk_size_gb: float,
           env_state_type: str | None, env_state_instance_id: str | None,
           snapshot_id: str | None, network_policy: str | None, gateway: str | None,
           service_db: str | None, as_json: bool) -> None:
    """Deploy a stored env behind its gateway; it stays up until its TTL or env teardown."""
    import asyncio

    from agent_env.bundles.file_entities import stored_env

    record = stored_env(env_id, version)
    chain = option_chain(sandbox)
    step = _deploy_step(record, ttl_seconds, {
        "gateway_mode": gateway_mode, "cpu": cpu, "memory_mb": memory_mb,
        "disk_size_gb": disk_size_gb, "env_state_type": env_state_type,
        "env_state_instance_id": env_state_instance_id, "network_policy": network_policy,
        "snapshot_id": snapshot_id})
    from agent_env.tasks.step_types.env_steps import stored_env_problem

    for option, named, role in (("--gateway", gateway, "gateway"),
                                ("--service-db", service_db, "store")):
        problem = stored_env_problem(named, role) if named else None
        if problem:
            raise UserError(f"{option} {named}: {problem}")
    if service_db and not (env_state_type or env_state_instance_id):
        raise UserError(f"--service-db {service_db}: it runs an env state's store; give "
                        "--env-state-type (or --env-state-instance-id) too")
    entry, deployed = asyncio.run(_deploy(record, ttl_seconds, chain, step, gateway,
                                          service_db))
    token = str(deployed.token or "")
    configs = deployed.client_configs() if token else []
    if as_json:
        click.echo(json.dumps({**entry.to_json(), "token": token,
                               **{key: config for key, _, config in configs}}, indent=2))
        return
    echo("Deployed!")
    echo(f"Instance ID: {entry.instance_id}")
    for name, url in entry.urls.items():
        echo(f"Env {URL_NAMES.get(name, name.capitalize())} Url: {url}")
    echo(f"Expires At (UTC): {entry.expires_at.strftime('%Y-%m-%d %H:%M:%S')}")
    if token:  # an env type whose deployment takes no token prints none
        echo(f"Token: {token}  (send it as 'Authorization: Bearer <token>'; shown only now)")
        for _, title, config in configs:
            echo(title)
            click.echo(json.dumps(config, indent=2))
    echo(f"Tear it down with: agent-env env teardown --id {entry.instance_id}")


# -- list / get-instance / teardown ---------------------------------------------------------------


@env.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_deployments(as_json: bool) -> None:
    """Deployed envs with their expiry; expired ones say so."""
    from agent_env.cli.deployed import list_kind

    list_kind("env", as_json, "gateway")


@env.command("get-instance")
@click.option("--id", "instance_id", type=ENTITY_ID, required=True,
              help="The instance id env deploy printed.")
def get_instance(instance_id: str) -> None:
    """Print one deployment as JSON (its token is not stored, so not shown)."""
    from agent_env.cli.deployed import get_kind

    get_kind("env", instance_id)


@env.command("teardown")
@click.option("--id", "instance_id", type=ENTITY_ID, help="The instance id env deploy printed.")
@click.option("--all", "everything", is_flag=True, help="Every deployed env.")
def teardown(instance_id: str | None, everything: bool) -> int:
    """Remove a deployed env (its containers and networks) now; idempotent."""
    from agent_env.cli.deployed import teardown_kind

    return teardown_kind("env", instance_id, everything)


# -- durable env state ---------------------------------------------------------------------------


@env.command("init-env-state")
@click.option("--id", "env_id", type=ENTITY_ID, required=True,
              help="The stored env whose servers keep their data in it.")
@click.option("--env-state-type", metavar="TYPE", required=True,
              help="The kind of store (local_postgres: a PostgreSQL, one schema per server).")
@click.option("--ttl-seconds", type=click.IntRange(3 * 3600, 365 * 24 * 3600),
              default=30 * 24 * 3600, show_default=True,
              help="How long deploys may attach it (3 hours to a year); its data stays until "
                   "teardown-env-state.")
@click.option("--sandbox", default="docker", show_default=True, metavar="PROVIDER",
              help="The sandbox provider whose engine keeps its data (deploys that attach "
                   "it run there).")
def init_env_state(env_id: str, env_state_type: str, ttl_seconds: int, sandbox: str) -> None:
    """Make a durable env state for an env and print its instance id: deploys that name it
    (env_state_instance_id) read and write the same data, run after run."""
    import datetime as dt

    from agent_env.bundles.entities import stored_artifacts
    from agent_env.deployments import utc_now
    from agent_env.env_state import EnvStateInstance, env_states, new_instance_id
    from agent_env.env_types import load_env_source
    from agent_env.runtime import current
    from agent_env.tasks.sandboxes import open_provider

    artifacts = stored_artifacts()
    try:
        source = load_env_source(artifacts, env_id)
    except Exception as exc:
        raise UserError(f"--id {env_id}: {exc}") from None
    env_type = current().host.registry("env_type").get(source.type)
    if env_type is None:
        raise UserError(f"--id {env_id}: its type '{source.type}' is not installed")
    if env_state_type not in env_type.env_state_types:
        backs = ", ".join(env_type.env_state_types) or "none"
        raise UserError(f"--env-state-type {env_state_type}: envs of type '{source.type}' back "
                        f"no such env state (they back: {backs})")
    open_provider(sandbox)  # an unknown or unavailable provider is one line, before the record
    names = env_type.from_spec(source, artifacts).state_names()
    now = utc_now()
    instance = EnvStateInstance(
        instance_id=new_instance_id(), state_type=env_state_type, env_id=source.id,
        provider=sandbox, created_at=now, expires_at=now + dt.timedelta(seconds=ttl_seconds),
        metadata={"env_type": source.type, "schemas": names})
    env_states().add(instance)
    echo(f"Initialized {env_state_type} env state for env {source.id} "
         f"(its store starts with the first deploy that attaches it, on '{sandbox}')")
    echo(f"  schemas:   {', '.join(names) or '(none)'}")
    echo(f"  created:   {instance.created_at:%Y-%m-%d %H:%M} UTC")
    echo(f"  expires:   {instance.expires_at:%Y-%m-%d %H:%M} UTC")
    echo(f"Env State Instance ID: {instance.instance_id}")
    echo(f"Attach it with: agent-env env deploy --id {source.id} --env-state-instance-id "
         f"{instance.instance_id} (or env_state_instance_id in a deploy_env step)")


@env.command("teardown-env-state")
@click.option("--instance-id", required=True, metavar="ID",
              help="The env state instance id (esi-...) init-env-state printed.")
def teardown_env_state(instance_id: str) -> None:
    """Remove a durable env state and its data; idempotent."""
    import asyncio

    from agent_env.env_state import env_states
    from agent_env.runtime import current

    states = env_states()
    instance = states.get(instance_id)
    if instance is None:
        echo(f"No env state instance {instance_id} found; nothing to tear down.")
        return
    kind = str(instance.metadata.get("env_type") or "")
    env_type = current().host.registry("env_type").get(kind)
    if env_type is None:
        raise UserError(f"env state {instance_id} was made by env type '{kind}', which is not "
                        "installed: install it to remove its data (the record is kept)")
    echo(f"Tearing down env state instance {instance_id} ({instance.state_type})...")
    asyncio.run(env_type.release_env_state(instance))
    states.remove(instance_id)
    echo(f"Done. {instance_id} torn down, its data removed.")


# -- snapshots -----------------------------------------------------------------------------------


@env.command("snapshot")
@click.option("--instance-id", metavar="ID", help="The deployment (env deploy's instance id) "
                                                  "whose containers to save.")
@click.option("--list", "listing", is_flag=True, help="The saved snapshots.")
@click.option("--remove", metavar="SNAPSHOT_ID", help="Remove a snapshot and its images.")
def snapshot(instance_id: str | None, listing: bool, remove: str | None) -> None:
    """Save a deployed env's containers (its servers, services and state store, with their
    data) as images; env deploy --from-snapshot ID (deploy_env's snapshot_id) starts from them."""
    import asyncio

    from agent_env.env_snapshots import env_snapshots

    snapshots = env_snapshots()
    if listing:
        for found in snapshots.all():
            echo(f"{found.snapshot_id}  {found.env_id} v{found.env_version}  {found.provider}  "
                 f"{found.created_at:%Y-%m-%d %H:%M} UTC  "
                 f"{', '.join(sorted(i.container for i in found.images))}")
        return
    if remove:
        asyncio.run(_remove_snapshot(remove))
        return
    if not instance_id:
        raise UserError("give --instance-id ID (a deployed env), --list or --remove ID")
    saved = asyncio.run(_save_snapshot(instance_id))
    echo(f"Saved {', '.join(sorted(i.container for i in saved.images))} of env {saved.env_id} "
         f"v{saved.env_version}")
    echo(f"Snapshot ID: {saved.snapshot_id}")
    echo(f"Deploy from it with: agent-env env deploy --id {saved.env_id} --from-snapshot "
         f"{saved.snapshot_id}")


async def _save_snapshot(instance_id: str) -> Any:
    from agent_env.deployments import deployments, utc_now
    from agent_env.env_snapshots import (
        SNAPSHOT_LABEL,
        EnvSnapshot,
        env_snapshots,
        new_snapshot_id,
    )
    from agent_env.tasks.sandboxes import open_provider

    deployment = deployments().get(instance_id)
    if deployment is None or deployment.kind != "env":
        raise UserError(f"--instance-id {instance_id}: no deployed env has that id (agent-env "
                        "env list)")
    sandbox = await open_provider(deployment.provider).attach(deployment.sandbox_id)
    if sandbox is None:
        raise UserError(f"--instance-id {instance_id}: its sandbox is gone")
    snapshot_id = new_snapshot_id()
    images = await sandbox.commit_containers(labels={
        SNAPSHOT_LABEL: snapshot_id, "agentenv.env": deployment.entity_id})
    saved = EnvSnapshot(snapshot_id, deployment.entity_id, deployment.entity_version,
                        deployment.provider, utc_now(), tuple(images),
                        deployment.env_state_type)
    env_snapshots().add(saved)
    return saved


async def _remove_snapshot(snapshot_id: str) -> None:
    from agent_env.env_snapshots import env_snapshots
    from agent_env.tasks.sandboxes import open_provider

    snapshots = env_snapshots()
    found = snapshots.get(snapshot_id)
    if found is None:
        echo(f"No snapshot {snapshot_id}; nothing to remove.")
        return
    await open_provider(found.provider).remove_committed(found.images)
    snapshots.remove(snapshot_id)
    echo(f"Removed snapshot {snapshot_id} and its images.")

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
                command = registry[name].command()
            except Exception:  # one broken env type must not hide the others' commands
                continue
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
URL_NAMES = {"mcp": "MCP"}


#: ``env deploy`` options that are ``deploy_env`` keys of the same name.
DEPLOY_KEYS = ("gateway_mode", "cpu", "memory_mb", "disk_size_gb", "env_state_type",
               "env_state_instance_id")


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
                  gateway: str | None = None) -> tuple[Any, Any]:
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
                      artifacts=stored_artifacts(), choices=RunChoices(gateway_env=gateway),
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
              help="Env state (multi-service env types; not installed here).")
@click.option("--env-state-instance-id", metavar="ID", help="An env state to attach to.")
@click.option("--gateway", "--gateway-env-id", "gateway", type=ENTITY_ID, metavar="ID",
              help="A stored gateway env (env gateway put) to deploy behind, instead of the "
                   "built-in gateway.")
@click.option("--json", "as_json", is_flag=True, help="Print the deployment as JSON.")
def deploy(env_id: str, version: int | None, ttl_seconds: int, sandbox: str | None,
           gateway_mode: str, cpu: float | None, memory_mb: int | None, disk_size_gb: float,
           env_state_type: str | None, env_state_instance_id: str | None,
           gateway: str | None, as_json: bool) -> None:
    """Deploy a stored env behind its gateway; it stays up until its TTL or env teardown."""
    import asyncio

    from agent_env.bundles.file_entities import stored_env

    record = stored_env(env_id, version)
    chain = option_chain(sandbox)
    step = _deploy_step(record, ttl_seconds, {
        "gateway_mode": gateway_mode, "cpu": cpu, "memory_mb": memory_mb,
        "disk_size_gb": disk_size_gb, "env_state_type": env_state_type,
        "env_state_instance_id": env_state_instance_id})
    if gateway:
        from agent_env.tasks.step_types.env_steps import gateway_env_problem

        problem = gateway_env_problem(gateway)
        if problem:
            raise UserError(f"--gateway {gateway}: {problem}")
    entry, deployed = asyncio.run(_deploy(record, ttl_seconds, chain, step, gateway))
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

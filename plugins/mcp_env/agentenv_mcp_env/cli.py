"""``agent-env env mcp-server``, ``env multi`` and ``env gateway``: register an env that serves
MCP from a Docker build context, one made of several such envs, or a gateway, and validate one.

``put`` stores the build context as the next version of an env (the same content-hash ledger a
bundle's envs go through: unchanged = the same version). ``validate`` runs deploy + card check +
core protocol check as a task and tears everything down, like any run. The kernel's ``env``
group offers this group because the ``mcp_server`` env type names it
(:meth:`agent_env.api.EnvType.command`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agent_env.api import ENTITY_ID, VERSION, echo


@click.group("mcp-server")
def mcp_server() -> None:
    """Envs that serve MCP from a Docker build context: put, validate."""


@mcp_server.command("put")
@click.option("--id", "env_id", type=ENTITY_ID, required=True,
              help="The env's id.")
@click.option("--dockerfile", type=click.Path(path_type=Path, dir_okay=False),
              help="The Dockerfile (inside --context; default: its ./Dockerfile).")
@click.option("--context", type=click.Path(path_type=Path, file_okay=False),
              help="The Docker build context (default: the Dockerfile's folder).")
@click.option("--image-ref", help="A prebuilt image to run instead of building.")
@click.option("--environment-name", help="The name its card gives (default: read from "
              "@environment_card(name=...) in its Python files).")
@click.option("--validate", "then_validate", is_flag=True,
              help="Then run env mcp-server validate on the version stored.")
@click.pass_context
def put(click_ctx: click.Context, env_id: str, dockerfile: Path | None, context: Path | None,
        image_ref: str | None, environment_name: str | None, then_validate: bool) -> int:
    """Store a build context as the next version of env ID (unchanged: the same version)."""
    from agent_env.api import put_env

    lines = put_env(env_id, "mcp_server", context, dockerfile, image_ref, environment_name)
    for line in lines:
        echo(line)
    if then_validate:
        return int(click_ctx.invoke(validate, env_id=env_id, version=lines[-1].version,
                                    sandbox=None) or 0)
    return 0


@mcp_server.command("validate")
@click.argument("env_id")
@click.option("--version", type=VERSION, help="A version (default: the latest).")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
def validate(env_id: str, version: int | None, sandbox: str | None) -> int:
    """Deploy the env, check its card (tool schemas) and core protocol, and its tools against
    the OpenAPI spec a server publishes (when one does), tear it down."""
    return _validate(env_id, version, sandbox)


def _validate(env_id: str, version: int | None, sandbox: str | None) -> int:
    from agent_env.api import (
        RunRequest,
        TaskSpec,
        option_chain,
        run_tasks,
        stored_artifacts,
        stored_env,
    )

    record = stored_env(env_id, version)
    steps = [
        {"id": "deploy", "type": "deploy_env", "env_id": record.id,
         "env_version": record.version},
        {"id": "card", "type": "verify_env_card", "env_id": record.id,
         "depends_on": ["deploy"]},
        {"id": "core_protocol", "type": "verify_env_core_protocol", "env_id": record.id,
         "depends_on": ["deploy"]},
        # scored only when a server publishes /openapi.yaml
        {"id": "spec", "type": "verify_spec_conformance", "env_id": record.id,
         "depends_on": ["deploy"]},
    ]
    label = f"validate env {record.id} v{record.version}"
    spec = TaskSpec(f"{record.id}.validate", label, tuple(steps), None)
    _, code = run_tasks([RunRequest(spec, stored_artifacts(), {})],
                        sandbox_chain=option_chain(sandbox))
    return code


@click.group("multi")
def multi() -> None:
    """Envs made of several MCP server envs (and services) behind one gateway: put,
    validate."""


@multi.command("put")
@click.option("--id", "env_id", type=ENTITY_ID, required=True, help="The env's id.")
@click.option("--mcp-server", "mcp_servers", multiple=True, type=ENTITY_ID, required=True,
              metavar="ENV_ID", help="A stored mcp_server env it deploys; repeatable.")
@click.option("--service", "services", multiple=True, type=ENTITY_ID, metavar="ENV_ID",
              help="A stored service env started beside them (a database...); repeatable.")
@click.option("--website", "websites", multiple=True, type=ENTITY_ID, metavar="ENV_ID",
              help="A stored website env deployed with them (and a browser); repeatable.")
@click.option("--name", help="What clients call it (default: the id's last part).")
@click.option("--env-provider-type", default="gateway", show_default=True,
              type=click.Choice(["gateway"]), help="How it deploys: behind one gateway.")
@click.option("--validate", "then_validate", is_flag=True,
              help="Then run env multi validate on the version stored.")
def put_multi(env_id: str, mcp_servers: tuple[str, ...], services: tuple[str, ...],
              websites: tuple[str, ...], name: str | None, env_provider_type: str,
              then_validate: bool) -> int:
    """Store a multi env as the next version of ID (unchanged: the same version)."""
    from agent_env.api import UserError, load_env_source, put_settings_env, stored_artifacts

    artifacts = stored_artifacts()
    for option, children, kind, how in (
            ("--mcp-server", mcp_servers, "mcp_server", "agent-env env mcp-server put"),
            ("--service", services, "service", "a bundle run: it stores its envs"),
            ("--website", websites, "website", "agent-env env website put")):
        for child in children:  # each must be stored, and of its kind
            try:
                source = load_env_source(artifacts, child)
            except Exception as exc:
                raise UserError(f"{option} {child}: {exc} (store it with {how})") from None
            if source.type != kind:
                raise UserError(f"{option} {child}: an env of type '{source.type}', not "
                                f"{kind}")
    settings = {"mcp_server_envs": list(mcp_servers), "env_provider_type": env_provider_type,
                **({"service_envs": list(services)} if services else {}),
                **({"website_envs": list(websites)} if websites else {}),
                **({"name": name} if name else {})}
    lines = put_settings_env(env_id, "multi", settings)
    for line in lines:
        echo(line)
    if then_validate:
        return _validate(env_id, lines[-1].version, None)
    return 0


@multi.command("validate")
@click.argument("env_id")
@click.option("--version", type=VERSION, help="A version (default: the latest).")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
def validate_multi(env_id: str, version: int | None, sandbox: str | None) -> int:
    """Deploy the env and its children, check the card and core protocol, tear it down."""
    return _validate(env_id, version, sandbox)


@click.group("gateway")
def gateway() -> None:
    """Gateways envs deploy behind (--gateway-env-id): put."""


@gateway.command("put")
@click.option("--id", "env_id", type=ENTITY_ID, required=True, help="The gateway env's id.")
@click.option("--context", type=click.Path(path_type=Path, file_okay=False),
              help="A build context of your own (default: the gateway this installation "
                   "builds).")
@click.option("--dockerfile", type=click.Path(path_type=Path, dir_okay=False),
              help="The Dockerfile (inside --context; default: its ./Dockerfile).")
def put_gateway(env_id: str, context: Path | None, dockerfile: Path | None) -> int:
    """Store a gateway as the next version of ID (unchanged: the same version)."""
    import tempfile

    from agent_env.api import put_env
    from agentenv_mcp_env.gateway_image import write_gateway_context

    with tempfile.TemporaryDirectory(prefix="agent-env-gateway-") as folder:
        if context is None and dockerfile is None:
            context = write_gateway_context(Path(folder))
        for line in put_env(env_id, "gateway_server", context, dockerfile, None, "gateway"):
            echo(line)
    return 0


@click.group("service-db")
def service_db() -> None:
    """Env state stores a run's env states run (--service-db-env-id): put."""


@service_db.command("put")
@click.option("--id", "env_id", type=ENTITY_ID, default="default-db", show_default=True,
              help="The store env's id.")
@click.option("--context", type=click.Path(path_type=Path, file_okay=False),
              help="A build context of your own (default: the PostgreSQL store this "
                   "installation builds).")
@click.option("--dockerfile", type=click.Path(path_type=Path, dir_okay=False),
              help="The Dockerfile (inside --context; default: its ./Dockerfile).")
def put_service_db(env_id: str, context: Path | None, dockerfile: Path | None) -> int:
    """Store an env state store as the next version of ID (unchanged: the same version)."""
    from agent_env.api import put_env
    from agentenv_mcp_env.state import CONTEXT

    if context is None and dockerfile is None:
        context = CONTEXT
    for line in put_env(env_id, "service_db", context, dockerfile, None, "servicedb"):
        echo(line)
    return 0


# -- loading environment data into a deployed env ------------------------------------------------

TOKEN_OPTION = click.option(
    "--token", envvar="AGENT_ENV_TOKEN", metavar="TOKEN",
    help="The env's token, as env deploy printed it (default: $AGENT_ENV_TOKEN). It is never "
         "stored, so a deployed env cannot be reached without it.")


@mcp_server.command("load-environment-artifact")
@click.option("--instance-id", required=True, help="The deployed env (env deploy's instance id).")
@click.option("--environment-artifact-id", "artifact_id", required=True,
              help="The environment artifact whose file seeds the server of its name.")
@click.option("--id", "env_id", help="The env's id (checked against the deployment).")
@TOKEN_OPTION
def load_mcp_server(instance_id: str, artifact_id: str, env_id: str | None,
                    token: str | None) -> None:
    """Seed a deployed env's server from an environment artifact (data/reset, data/add)."""
    _load(instance_id, artifact_id, "environment", token, env_id)


@multi.command("load-environment-artifact")
@click.option("--env-instance-id", "instance_id", required=True,
              help="The deployed multi env (env deploy's instance id).")
@click.option("--environment-artifact-id", "artifact_id", required=True,
              help="The environment artifact; it goes to the child of its environment name.")
@TOKEN_OPTION
def load_multi(instance_id: str, artifact_id: str, token: str | None) -> None:
    """Seed the child of a deployed multi env that the environment artifact names."""
    _load(instance_id, artifact_id, "environment", token, None)


@multi.command("load-environment-universe-artifact")
@click.option("--env-instance-id", "instance_id", required=True,
              help="The deployed multi env (env deploy's instance id).")
@click.option("--environment-universe-artifact-id", "artifact_id", required=True,
              help="The universe: each environment in it seeds the child of that name.")
@click.option("--snapshot-after-load/--no-snapshot-after-load", default=False,
              help="Refused: save the seeded env with agent-env env snapshot --instance-id.")
@TOKEN_OPTION
def load_multi_universe(instance_id: str, artifact_id: str, snapshot_after_load: bool,
                        token: str | None) -> None:
    """Seed every child of a deployed multi env from a universe (4 at a time; resumable)."""
    from agent_env.api import UserError

    if snapshot_after_load:
        raise UserError("--snapshot-after-load is not supported here; after the load, "
                        f"agent-env env snapshot --instance-id {instance_id} saves the seeded "
                        "env, and env deploy --from-snapshot starts from it")
    _load(instance_id, artifact_id, "environment_universe", token, None)


def _load(instance_id: str, artifact_id: str, kind: str, token: str | None,
          env_id: str | None) -> None:
    import asyncio

    from agent_env.api import (
        EnvDataError,
        LoadedEnvironments,
        UserError,
        current,
        seed_environments,
        stored_artifacts,
    )

    try:
        artifact = stored_artifacts().load_now(artifact_id)
    except LookupError as exc:
        raise UserError(f"--{kind.replace('_', '-')}-artifact-id: {exc}") from None
    if artifact.type != kind:
        raise UserError(f"artifact {artifact_id} is of type '{artifact.type}', not '{kind}' "
                        f"(agent-env artifact {kind.replace('_', '-')} put stores one)")
    deployment = asyncio.run(_reattach(instance_id, token, env_id))
    try:
        loaded = asyncio.run(seed_environments(
            deployment, artifact, progress=echo,
            loads=LoadedEnvironments(current().document_store)))
    except EnvDataError as exc:
        raise UserError(str(exc)) from None
    echo(f"Loaded {artifact.id} v{artifact.version} into {instance_id}: "
         f"{', '.join(loaded) or 'nothing left to load'}")


async def _reattach(instance_id: str, token: str | None, env_id: str | None) -> Any:
    """The deployed env ``instance_id`` as a deployment this process can seed: its gateway (the
    ledger's URL, checked with ``token``), its sandbox, its servers (from its env type)."""
    from agent_env.api import (
        UserError,
        current,
        deployments,
        load_env_source,
        open_provider,
        stored_artifacts,
    )
    from agentenv_protocol.client import fetch_card
    from agentenv_protocol.errors import TransportError

    entry = deployments().get(instance_id)
    if entry is None or entry.kind != "env":
        raise UserError(f"no deployed env '{instance_id}' (agent-env env list shows them)")
    if env_id is not None and env_id != entry.entity_id:
        raise UserError(f"--id {env_id}: deployment {instance_id} is of env {entry.entity_id}")
    if entry.expired():
        raise UserError(f"deployment {instance_id} has expired (agent-env gc removes it)")
    if not token:
        raise UserError("the env's token is needed: pass --token (env deploy printed it) or "
                        "set AGENT_ENV_TOKEN; it is never stored")
    url = entry.urls.get("gateway", "").rstrip("/")
    headers = {"Authorization": f"Bearer {token}"}
    try:
        await fetch_card(url, headers=headers)
    except TransportError as exc:
        why = ("the token is not this env's" if exc.status in (401, 403)
               else f"its gateway does not answer ({exc})")
        raise UserError(f"deployment {instance_id}: {why}") from None
    sandbox = await open_provider(entry.provider).attach(entry.sandbox_id)
    if sandbox is None:
        raise UserError(f"deployment {instance_id}: its sandbox is gone")
    artifacts = stored_artifacts()
    source = load_env_source(artifacts, entry.entity_id, entry.entity_version)
    env_type = current().host.registry("env_type").get(source.type)
    env = env_type.from_spec(source, artifacts) if env_type is not None else None
    if not hasattr(env, "reattached"):
        raise UserError(f"deployment {instance_id}: env {source.id} is of type "
                        f"'{source.type}', whose servers this command cannot seed")
    return env.reattached(entry, token, sandbox)

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
    """Deploy the env, check its card (tool schemas) and core protocol, tear it down."""
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
@click.option("--website", "websites", multiple=True, metavar="ENV_ID",
              help="Refused: the website env type is not installed here.")
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

    if websites:
        raise UserError("--website: the website env type is not installed here; a multi env "
                        "deploys mcp_server envs (--mcp-server)")
    artifacts = stored_artifacts()
    for option, children, kind, how in (
            ("--mcp-server", mcp_servers, "mcp_server", "agent-env env mcp-server put"),
            ("--service", services, "service", "a bundle run: it stores its envs")):
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

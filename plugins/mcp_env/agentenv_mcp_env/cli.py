"""``agent-env env mcp-server``: register an env that serves MCP from a Docker build context,
and validate one.

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

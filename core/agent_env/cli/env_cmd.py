"""``agent-env env``: register envs, deploy one on its own, list, inspect and tear down.

``env mcp-server put`` stores a Docker build context as the next version of an env (the same
content-hash ledger a bundle's envs go through: unchanged = the same version).

``env deploy`` brings a stored env up behind its gateway and exits; the deployment lives until
its TTL or ``env teardown``. It goes through the ``deploy_env`` step type, the one place that
turns a stored env into a running one (its env type, the sandbox provider chain, the gateway),
so an env deploys the same way here as in a task. The sandbox carries
:data:`agent_env.deployments.DEPLOYMENT_LABEL` and the deployment is recorded in the
deployments ledger, which ``env list``/``get-instance``/``teardown`` read and ``agent-env gc``
enforces (a live one is kept, an expired one removed). The gateway's token is printed once,
with a ready-to-paste MCP client config; it is never stored.

``env mcp-server validate`` runs deploy + card check + core protocol check as a task and tears
everything down, like any run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from agent_env.cli.console import echo
from agent_env.cli.params import ENTITY_ID, TTL_SECONDS, VERSION
from agent_env.errors import UserError
from agent_env.sandbox.chain import option_chain

DEFAULT_TTL_SECONDS = 10800  # the reference's default


def _stored_env(env_id: str, version: int | None) -> Any:
    from agent_env.runtime import versioned_store

    record = versioned_store().get("envs", env_id, version)
    if record is None:
        latest = versioned_store().latest_version("envs", env_id) if version else 0
        if latest:
            raise UserError(f"env '{env_id}' has no version {version} (the latest is "
                            f"v{latest})")
        raise UserError(f"no env '{env_id}' is stored (agent-env env mcp-server put --id "
                        f"{env_id} --context DIR stores one)")
    return record


@click.group("env")
def env() -> None:
    """Envs: register (mcp-server put), deploy on their own, list, get-instance, teardown."""


# -- deploy ---------------------------------------------------------------------------------------


def _server_key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "env"


def client_config(name: str, mcp_url: str, token: str) -> dict[str, Any]:
    """The ``mcpServers`` block of clients that speak streamable HTTP themselves (Claude Code's
    ``.mcp.json``, Cursor, VS Code): the URL and the bearer header."""
    return {"mcpServers": {_server_key(name): {
        "type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer {token}"}}}}


def desktop_config(name: str, mcp_url: str, token: str) -> dict[str, Any]:
    """The same for Claude Desktop, whose config runs local commands only: the ``mcp-remote``
    bridge (npx) with the header passed through a variable, as its README shows."""
    return {"mcpServers": {_server_key(name): {
        "command": "npx",
        "args": ["mcp-remote", mcp_url, "--header", "Authorization:${AUTH_HEADER}"],
        "env": {"AUTH_HEADER": f"Bearer {token}"}}}}


async def _deploy(record: Any, ttl: int, chain: list[str] | None) -> tuple[Any, Any]:
    """Run the ``deploy_env`` step in a context of its own and keep what it brought up.

    Returns (ledger record, the env type's deployment object). On any failure everything the
    step brought up is taken down and nothing is recorded."""
    import asyncio
    import datetime as dt
    import secrets

    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.bundles.plan import step_registry
    from agent_env.deployments import DEPLOYMENT_LABEL, Deployment, deployments, utc_now
    from agent_env.runtime import object_store, versioned_store
    from agent_env.sandbox.base import SandboxError
    from agent_env.tasks.context import TaskContext
    from agent_env.tasks.steps import StepError, structure_step

    step_class = step_registry().get("deploy_env")
    if step_class is None:
        raise UserError("no installed plugin deploys envs (the 'deploy_env' step type): "
                        "install agentenv-mcp-env")
    # the reference's shape, <env>-<8 random>; chosen here so the sandbox carries it as its
    # DEPLOYMENT_LABEL from the start (docker ps --filter label=agentenv.deployment=<id>)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    slug = re.sub(r"[^a-z0-9-]+", "-", record.id.rsplit("/", 1)[-1].lower()).strip("-")
    deploy_id = f"{slug or 'env'}-{''.join(secrets.choice(alphabet) for _ in range(8))}"
    ctx = TaskContext(task_id=f"env deploy {record.id}", instance_id=deploy_id,
                      artifacts=StoredArtifacts(versioned_store(), object_store()),
                      sandbox_chain=chain, labels={DEPLOYMENT_LABEL: deploy_id})
    ctx.note_sink = lambda line: echo(line, err=True)
    step = structure_step(step_class, {"id": "deploy", "type": "deploy_env",
                                       "env_id": record.id, "env_version": record.version,
                                       "ttl_seconds": ttl})
    created = utc_now()
    try:
        await step.run(ctx)
        deployed = ctx.env(record.id)
        (sandbox,) = ctx.sandboxes.values()
        expires = getattr(deployed, "expires_at", None) or created + dt.timedelta(seconds=ttl)
        url = str(deployed.url).rstrip("/")
        entry = Deployment(
            instance_id=deploy_id, kind="env",
            entity_id=record.id, entity_version=record.version,
            provider=sandbox.provider_name, sandbox_id=sandbox.id,
            urls={"mcp": f"{url}/mcp", "gateway": url}, created_at=created,
            expires_at=expires,
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
@click.option("--json", "as_json", is_flag=True, help="Print the deployment as JSON.")
def deploy(env_id: str, version: int | None, ttl_seconds: int, sandbox: str | None,
           as_json: bool) -> None:
    """Deploy a stored env behind its gateway; it stays up until its TTL or env teardown."""
    import asyncio

    record = _stored_env(env_id, version)
    chain = option_chain(sandbox)
    entry, deployed = asyncio.run(_deploy(record, ttl_seconds, chain))
    token = str(getattr(deployed, "token", "") or "")
    name = str(getattr(deployed, "environment_name", "") or env_id)
    config = client_config(name, entry.urls["mcp"], token) if token else None
    if as_json:
        desktop = desktop_config(name, entry.urls["mcp"], token) if token else None
        click.echo(json.dumps({**entry.to_json(), "token": token, "mcp_client_config": config,
                               "claude_desktop_config": desktop}, indent=2))
        return
    echo("Deployed!")
    echo(f"Instance ID: {entry.instance_id}")
    echo(f"Env MCP Url: {entry.urls['mcp']}")
    echo(f"Env Gateway Url: {entry.urls['gateway']}")
    echo(f"Expires At (UTC): {entry.expires_at.strftime('%Y-%m-%d %H:%M:%S')}")
    if config is not None:  # an env type whose gateway takes no token prints none
        echo(f"Token: {token}  (send it as 'Authorization: Bearer <token>'; "
                   "shown only now)")
        echo("MCP client config (mcpServers, streamable HTTP: Claude Code .mcp.json, "
                   "Cursor):")
        click.echo(json.dumps(config, indent=2))
        echo("Claude Desktop (claude_desktop_config.json, through npx mcp-remote):")
        click.echo(json.dumps(desktop_config(name, entry.urls["mcp"], token), indent=2))
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


# -- registered envs ------------------------------------------------------------------------------


@env.group("mcp-server")
def mcp_server() -> None:
    """Envs that serve MCP from a Docker build context: put, validate."""


def _env_entry(env_id: str, context: Path | None, dockerfile: Path | None,
               image_ref: str | None, environment_name: str | None) -> Any:
    """The env as the ledger stores it, from a build context; every problem raised at once."""
    from agent_env.bundles.model import BundleFile, EnvEntry
    from agent_env.bundles.parse import _CARD, DEFAULT_ENV_TYPE, _sha256, collect_files

    if context is None and dockerfile is not None:
        context = dockerfile.parent
    problems: list[str] = []
    files: list[BundleFile] = []
    if context is not None:
        if not context.is_dir():
            raise UserError(f"--context {context}: not a folder")
        named = "Dockerfile"
        if dockerfile is not None and dockerfile.resolve().is_relative_to(context.resolve()):
            named = dockerfile.resolve().relative_to(context.resolve()).as_posix()
        files = collect_files(context, str(context), problems, build_context=True,
                              dockerfile=named)
        if dockerfile is not None:
            root, full = context.resolve(), dockerfile.resolve()
            if not full.is_relative_to(root):
                raise UserError(f"--dockerfile {dockerfile} is outside --context {context}: "
                                "put it in the build context")
            if not full.is_file():
                raise UserError(f"--dockerfile {dockerfile}: no such file")
            relative = full.relative_to(root).as_posix()
            if relative != "Dockerfile":  # the build reads ./Dockerfile: store it there
                stat = full.stat()
                files = [f for f in files if f.path != "Dockerfile"]
                files.append(BundleFile("Dockerfile", full, _sha256(full), stat.st_size,
                                        0o644))
        if not any(f.path == "Dockerfile" for f in files):
            problems.append(f"{context}: has no Dockerfile (give --dockerfile)")
    elif not image_ref:
        raise UserError("give --context DIR (a Docker build context) or --image-ref IMAGE")
    if problems:
        raise UserError("; ".join(problems))
    name = environment_name
    if not name:
        cards = {m for f in files if f.path.endswith(".py")
                 for m in _CARD.findall(f.source.read_text(encoding="utf-8", errors="replace"))}
        if len(cards) == 1:
            name = cards.pop()
    return EnvEntry(env_id.rsplit("/", 1)[-1], env_id, DEFAULT_ENV_TYPE, f"env {env_id}",
                    context or Path("."), tuple(sorted(files, key=lambda f: f.path)),
                    image_ref, name)


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
    from agent_env.bundles.ledger import Ledger
    from agent_env.runtime import object_store, versioned_store

    if not env_id.strip() or any(c.isspace() for c in env_id):
        raise UserError(f"--id {env_id!r}: an env id has no spaces")
    entry = _env_entry(env_id, context, dockerfile, image_ref, environment_name)
    ledger = Ledger(versioned_store(), object_store())
    ledger.write_files_entity("envs", entry)
    for line in ledger.lines:
        echo(line)
    if then_validate:
        return int(click_ctx.invoke(validate, env_id=env_id, version=ledger.lines[-1].version,
                                    sandbox=None) or 0)
    return 0


@mcp_server.command("validate")
@click.argument("env_id")
@click.option("--version", type=VERSION, help="A version (default: the latest).")
@click.option("--sandbox", metavar="A[,B...]", help="Sandbox providers (a fallback chain).")
def validate(env_id: str, version: int | None, sandbox: str | None) -> int:
    """Deploy the env, check its card (tool schemas) and core protocol, tear it down."""
    from agent_env.bundles.entities import StoredArtifacts
    from agent_env.cli.run_cmd import execute
    from agent_env.runtime import object_store, versioned_store
    from agent_env.tasks.plan import TaskSpec
    from agent_env.tasks.session import RunRequest

    record = _stored_env(env_id, version)
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
    request = RunRequest(spec, StoredArtifacts(versioned_store(), object_store()), {})
    chain = option_chain(sandbox)
    _, code = execute([request], sandbox_chain=chain)
    return code

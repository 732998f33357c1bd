"""``agent-env env website`` and ``env website-browser``: store a website env or the browser
its deploys run, and seed a deployed website from an environment artifact."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from agent_env.api import ENTITY_ID, echo
from agentenv_mcp_env.cli import TOKEN_OPTION, _load


@click.group("website")
def website() -> None:
    """Envs that are a web app (backend + frontend) with a browser: put, load data."""


def _role_options(role: str):  # type: ignore[no-untyped-def]
    def wrap(command):  # type: ignore[no-untyped-def]
        command = click.option(
            f"--{role}-docker-context", f"{role}_context",
            type=click.Path(path_type=Path, file_okay=False, exists=True),
            help=f"The {role}'s Docker build context (default: its Dockerfile's folder).")(command)
        command = click.option(
            f"--{role}-dockerfile", f"{role}_dockerfile",
            type=click.Path(path_type=Path, dir_okay=False, exists=True),
            help=f"The {role}'s Dockerfile (default: Dockerfile in its context).")(command)
        command = click.option(
            f"--{role}-image-ref", f"{role}_image",
            help=f"A prebuilt {role} image to run instead of building.")(command)
        return command
    return wrap


@website.command("put")
@click.option("--id", "env_id", type=ENTITY_ID, required=True, help="The env's id.")
@_role_options("backend")
@_role_options("frontend")
@click.option("--environment-name", help="The website's name (default: the id's last part).")
@click.option("--env-provider-type", default="gateway", show_default=True,
              type=click.Choice(["gateway"]), help="How it deploys (through the gateway).")
def put(env_id: str, backend_context: Path | None, backend_dockerfile: Path | None,
        backend_image: str | None, frontend_context: Path | None,
        frontend_dockerfile: Path | None, frontend_image: str | None,
        environment_name: str | None, env_provider_type: str) -> None:
    """Store a website env: its backend and frontend build contexts (or images) as the next
    version of env ID (unchanged: the same version)."""
    import tempfile

    from agent_env.api import UserError, put_settings_env

    settings: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="agent-env-website-put-") as scratch:
        folder = Path(scratch)
        roles = {"backend": (backend_context, backend_dockerfile, backend_image),
                 "frontend": (frontend_context, frontend_dockerfile, frontend_image)}
        for role, (context, dockerfile, image) in roles.items():
            if image:
                if context or dockerfile:
                    raise UserError(f"--{role}-image-ref runs an image as it is: give it "
                                    f"without --{role}-dockerfile/--{role}-docker-context")
                settings[f"{role}_image"] = image
                continue
            if context is None and dockerfile is None:
                raise UserError(f"the {role} is missing: give --{role}-dockerfile (or "
                                f"--{role}-docker-context, or --{role}-image-ref)")
            context = context or dockerfile.parent  # type: ignore[union-attr]
            dockerfile = dockerfile or context / "Dockerfile"
            if not dockerfile.is_file():
                raise UserError(f"--{role}-docker-context {context}: it has no Dockerfile "
                                f"(give --{role}-dockerfile)")
            shutil.copytree(context, folder / role, symlinks=True)
            shutil.copyfile(dockerfile, folder / role / "Dockerfile")
        for line in put_settings_env(env_id, "website", settings, environment_name, folder):
            echo(line)


@website.command("load-environment-artifact")
@click.option("--instance-id", required=True, help="The deployed env (env deploy's instance id).")
@click.option("--environment-artifact-id", "artifact_id", required=True,
              help="The environment artifact whose file seeds the website's backend.")
@click.option("--id", "env_id", help="The env's id (checked against the deployment).")
@TOKEN_OPTION
def load(instance_id: str, artifact_id: str, env_id: str | None, token: str | None) -> None:
    """Seed a deployed website's backend from an environment artifact (data/reset, data/add;
    the REST /api/reset and /api/add where it serves no data plane)."""
    _load(instance_id, artifact_id, "environment", token, env_id)


@click.group("website-browser")
def website_browser() -> None:
    """The browser website envs deploy (Playwright MCP over Debian's Chromium): put."""


@website_browser.command("put")
@click.option("--id", "env_id", type=ENTITY_ID, default="website-browser", show_default=True,
              help="The env's id: website deploys use the one stored as website-browser.")
def put_browser(env_id: str) -> None:
    """Store the shipped website-browser as an mcp_server env (website deploys build it from
    there; without one stored they build the shipped folder itself)."""
    from agent_env.api import put_env
    from agentenv_mcp_env.sources import WEBSITE_BROWSER_CONTEXT

    for line in put_env(env_id, "mcp_server", WEBSITE_BROWSER_CONTEXT, None, None,
                        "website-browser"):
        echo(line)

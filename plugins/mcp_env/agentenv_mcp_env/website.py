"""The ``website`` env type: a web app (backend + frontend) and a browser, behind the gateway.

An ``envs/<name>/env.toml`` as the reference writes one::

    type = "website"
    environment_name = "todo"     # the website's name (default: the folder's name)

with each image built from, in this order: ``backend_image = "REF"`` / ``frontend_image =
"REF"`` (an image to run as it is), a ``backend/`` / ``frontend/`` folder holding a Dockerfile
(that folder is its build context; what ``env website put`` stores), or ``Dockerfile.backend``
/ ``Dockerfile.frontend`` beside the env.toml (the whole folder is the context, the reference's
bundle layout).

A deploy runs, on the env's private network (nothing but the gateway is published):

* the backend as ``<name>-website-backend`` with ``PORT=8000``, ``ENVIRONMENT_NAME`` and
  ``SERVICE_NAME`` (and ``DATABASE_URL`` with an env state), as the reference's compose does;
* the frontend as ``<name>-website-frontend`` (port 80) with ``BACKEND_URL``;
* the website-browser (:mod:`.website_browser`): Playwright MCP over Debian's Chromium, the
  env's MCP server, which sends a site token (it opens the website pages only) with its page
  requests;
* the gateway, with ``--website`` for the site: ``/website/<name>/`` reaches the frontend and
  ``/svc/<name>/`` the backend, every request an ``http_request`` trajectory event, and a
  ``list_website_urls`` tool (:mod:`agentenv_protocol.websites`).

It is ready when the gateway is: the browser serves its tools and the site answers (backend
``/api/health``, frontend ``/``). Environment data (``load_artifact``, ``env website
load-environment-artifact``) seeds the backend by the website's name (:mod:`.seeding`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from agent_env.api import EnvSource, StepError, build_with_progress, write_env_files
from agentenv_mcp_env.deployment import (
    ENV_LABEL,
    EnvServer,
    EnvServerRecord,
    McpServerEnv,
    PlannedService,
    policy_problems,
    unknown_key_problems,
)
from agentenv_mcp_env.sources import WEBSITE_BROWSER_CONTEXT, scratch_folder

if TYPE_CHECKING:
    from agent_env.api import EnvStateChoice, Sandbox

ROLES = ("backend", "frontend")
KEYS = ("backend_image", "frontend_image", "env_provider_type", "network_policy")
BACKEND_PORT = 8000
FRONTEND_PORT = 80
BACKEND_SUFFIX = "website-backend"
FRONTEND_SUFFIX = "website-frontend"
#: The browser's container (and its MCP server's name on the env's network).
BROWSER_CONTAINER = "website-browser"
#: The env a stored browser is looked up under (``env website-browser put``'s default id).
BROWSER_ENV_ID = "website-browser"


def builtin_browser() -> EnvSource:
    """The browser shipped with this plugin, used while no ``website-browser`` env is stored."""
    return EnvSource("agentenv/website-browser", 0, "website-browser", "mcp_server",
                     "website-browser", None)


@attrs.frozen
class Website:
    """One website of a deployment (a ``website`` env's, or one of a ``multi`` env's
    ``website_envs``): its containers, how they are built, its gateway route and record."""

    source: EnvSource
    artifacts: Any = attrs.field(repr=False)

    @property
    def name(self) -> str:
        return self.source.environment_name or self.source.name

    @property
    def backend(self) -> str:
        return f"{self.name}-{BACKEND_SUFFIX}"

    @property
    def frontend(self) -> str:
        return f"{self.name}-{FRONTEND_SUFFIX}"

    def planned(self, labels: dict[str, str],
                env_state: EnvStateChoice | None) -> list[PlannedService]:
        """Its backend and frontend, each built by :meth:`build_role` when started."""
        from agent_env.api import ContainerSpec

        backend_env = {"PORT": str(BACKEND_PORT), "ENVIRONMENT_NAME": self.name,
                       "SERVICE_NAME": self.name, "PYTHONUNBUFFERED": "1"}
        if env_state is not None:
            from agentenv_mcp_env.state import database_url

            backend_env["DATABASE_URL"] = database_url(self.name)
        own = {**labels, ENV_LABEL: self.source.id}

        def builder(role: str) -> Any:
            return lambda sandbox, say: self.build_role(sandbox, role, say)

        return [PlannedService(ContainerSpec(name=self.backend, image="", env=backend_env,
                                             labels=own),
                               None, builder("backend"), self.source.id, self.source.version),
                PlannedService(ContainerSpec(
                    name=self.frontend, image="", labels=own,
                    env={"BACKEND_URL": f"http://{self.backend}:{BACKEND_PORT}",
                         "PORT": str(FRONTEND_PORT)}),
                    None, builder("frontend"), self.source.id, self.source.version)]

    async def build_role(self, sandbox: Sandbox, role: str, say: Any) -> str:
        """The backend's or frontend's image: given, or built from its folder or Dockerfile."""
        given = self.source.settings.get(f"{role}_image")
        label = f"envs/{self.source.name}/{role}"
        if given:
            say(f"{label}: image {given} (given)")
            return str(given)
        with scratch_folder(f"agent-env-website-{role}-") as folder:
            await asyncio.to_thread(write_env_files, self.artifacts, self.source, folder)
            if (folder / role / "Dockerfile").is_file():
                context = folder / role
            elif (folder / f"Dockerfile.{role}").is_file():
                (folder / f"Dockerfile.{role}").replace(folder / "Dockerfile")
                context = folder
            else:
                raise StepError(f"website env '{self.source.id}' has no {role} to build "
                                f"({role}_image, {role}/Dockerfile or Dockerfile.{role})")
            return await build_with_progress(sandbox, str(context),
                                             f"{self.source.name}-{role}",
                                             {ENV_LABEL: self.source.id}, label, say)

    def gateway_arg(self) -> str:
        """Its gateway ``--website`` value."""
        return (f"{self.name}=http://{self.frontend}:{FRONTEND_PORT},"
                f"http://{self.backend}:{BACKEND_PORT}")

    def record(self, services: Sequence[EnvServerRecord]) -> tuple[EnvServerRecord, ...]:
        """Its backend among the started ``services``, named as the website (seeded so)."""
        return tuple(attrs.evolve(s, environment_name=self.name) for s in services
                     if s.container == self.backend)

    def reattached(self) -> EnvServerRecord:
        return EnvServerRecord(self.source.id, self.source.version, self.backend, "",
                               self.name)


def browser_source(artifacts: Any) -> EnvSource:
    """The stored ``website-browser`` env, else the one shipped with this plugin."""
    from agent_env.api import load_env_source

    try:
        return load_env_source(artifacts, BROWSER_ENV_ID)
    except StepError:  # none stored: the shipped one
        return builtin_browser()


async def build_shipped_browser(sandbox: Sandbox, source: EnvSource, say: Any) -> str | None:
    """The shipped browser's image when ``source`` is it; None for any other env."""
    if source.id != builtin_browser().id:
        return None
    return await build_with_progress(sandbox, str(WEBSITE_BROWSER_CONTEXT), BROWSER_CONTAINER,
                                     {ENV_LABEL: source.id}, "envs/website-browser", say)


class WebsiteEnv(McpServerEnv):
    """A website and a browser behind one gateway (see the module)."""

    name: ClassVar[str] = "website"

    def __init__(self, source: EnvSource, artifacts: Any,
                 companions: Sequence[EnvSource] = ()) -> None:
        super().__init__(source, artifacts, companions)
        self.browser = browser_source(artifacts)
        self.site = Website(source, artifacts)

    @property
    def environment_name(self) -> str:
        return self.site.name

    @property
    def servers(self) -> tuple[EnvServer, ...]:
        """The browser is the env's one MCP server."""
        return (EnvServer(self.browser, BROWSER_CONTAINER),)

    @classmethod
    def command(cls) -> Any:
        """``agent-env env website put / load-environment-artifact`` and ``env
        website-browser put``."""
        from agentenv_mcp_env.website_cli import website, website_browser

        return [website, website_browser]

    def with_companions(self, sources: Sequence[EnvSource]) -> WebsiteEnv:
        raise StepError("with_envs: a website env deploys its browser itself; put the other "
                        "envs in a multi env (website_envs)")

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        where = f"{env.label}/env.toml"
        problems = unknown_key_problems(env, KEYS, "website")
        provider = env.settings.get("env_provider_type", "gateway")
        if provider != "gateway":
            problems.append(f"{where}: env_provider_type {provider!r}: a website deploys "
                            "through the gateway here ('gateway')")
        paths = {f.path for f in env.files}
        for role in ROLES:
            ref = env.settings.get(f"{role}_image")
            if ref is not None and (not isinstance(ref, str) or not ref.strip()):
                problems.append(f"{where}: {role}_image must be an image reference")
            elif ref is None and f"{role}/Dockerfile" not in paths \
                    and f"Dockerfile.{role}" not in paths:
                problems.append(f"{env.label}: no {role} to build: give {role}_image in "
                                f"env.toml, a {role}/ folder with a Dockerfile, or "
                                f"Dockerfile.{role}")
        return problems + policy_problems(where, env.settings)

    async def _build_env(self, sandbox: Sandbox, source: EnvSource, say: Any) -> str:
        return await build_shipped_browser(sandbox, source, say) \
            or await super()._build_env(sandbox, source, say)

    def planned_services(self, labels: dict[str, str],
                         env_state: EnvStateChoice | None) -> list[PlannedService]:
        """The env state's store (if asked for), then the backend and the frontend."""
        return [*super().planned_services(labels, env_state),
                *self.site.planned(labels, env_state)]

    def server_env(self, server: EnvServer, site_token: str | None) -> dict[str, str]:
        """The browser sends the site token (it opens the website pages only) with its page
        requests."""
        return {"AGENTENV_WEBSITE_TOKEN": site_token or ""}

    def state_env(self, server: EnvServer, env_state: EnvStateChoice | None) -> dict[str, str]:
        return {}  # the browser keeps no state; the backend gets DATABASE_URL

    def state_names(self) -> list[str]:
        return [self.site.name]

    def gateway_websites(self) -> list[str]:
        return [self.site.gateway_arg()]

    def shown_containers(self) -> list[str]:
        return [self.site.backend, self.site.frontend]

    def website_records(self, services: Sequence[EnvServerRecord],
                        ) -> tuple[EnvServerRecord, ...]:
        return self.site.record(services)

    def reattached(self, entry: Any, token: str, sandbox: Sandbox) -> Any:
        deployment = super().reattached(entry, token, sandbox)
        return attrs.evolve(deployment, websites=(self.site.reattached(),))

"""The ``multi`` env type: several MCP servers deployed together as one env.

An ``envs/<name>/env.toml`` written as the reference writes one::

    type = "multi"
    name = "shop"                          # what clients call it (default: the folder's name)
    mcp_server_envs = ["orders", "stock"]  # envs of the bundle, or stored env ids

deploys every child (each an ``mcp_server`` env) behind **one** gateway: one token, one flat
tool namespace (a tool name two children serve refuses the deploy, as the gateway rules), one
trajectory, and a card naming the children. Each child runs as container ``env-<child>`` on
the env's private network, where the others reach it by that name; nothing but the gateway is
published. It is :class:`~agentenv_mcp_env.deployment.McpServerEnv` with the children as its
servers, so deploy, readiness, failure messages and teardown are the same code.

``service_envs = ["db"]`` (ours; the reference has no such key) adds containers that serve no
tools (``service`` envs: a database, a Harbor compose sidecar). They start first, under their
own ``name`` on the same private network, and the env servers start once each is healthy (see
:mod:`agentenv_mcp_env.service`).

``website_envs = ["shop"]`` (the reference's key) adds ``website`` envs: each site's backend
and frontend start as services, one website-browser joins the env servers (its tools in the
namespace), and the gateway serves each site at ``/website/<name>/`` and ``/svc/<name>/``
(:mod:`agentenv_mcp_env.website`). An ``env_provider_type`` other than ``gateway`` is refused
by name at preflight.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from agent_env.api import EnvSource, StepError, load_env_source
from agentenv_mcp_env.deployment import (
    ENV_LABEL,
    EnvServer,
    EnvServerRecord,
    McpServerEnv,
    PlannedService,
    named_servers,
    policy_problems,
    unknown_key_problems,
)
from agentenv_mcp_env.service import ServiceSettings, service_settings
from agentenv_mcp_env.website import (
    BROWSER_CONTAINER,
    Website,
    browser_source,
    build_shipped_browser,
)

if TYPE_CHECKING:
    from agent_env.api import EnvStateChoice, Sandbox

KEYS = ("mcp_server_envs", "service_envs", "website_envs", "name", "env_provider_type",
        "network_policy")
CHILD_TYPE = "mcp_server"
SERVICE_TYPE = "service"
WEBSITE_TYPE = "website"


def child_ids(env_id: str, settings: dict[str, Any], key: str = "mcp_server_envs") -> list[str]:
    """The env ids ``key`` names: a bare name is an env of the same bundle (an id beside this
    env's own), anything with a ``/`` a stored env's id; for an env whose own id has no ``/``
    (``env multi put --id office``) every name is a stored env's id."""
    root, rooted, _ = env_id.rpartition("/")
    names = settings.get(key) or []
    return [f"{root}/{n}" if rooted and "/" not in n else n for n in names
            if isinstance(n, str)]


@attrs.frozen
class Service:
    """A service child: its stored source and its checked settings."""

    source: EnvSource
    settings: ServiceSettings


class MultiEnv(McpServerEnv):
    """Every env of ``mcp_server_envs`` behind one gateway (see the module)."""

    name: ClassVar[str] = "multi"

    def __init__(self, source: EnvSource, artifacts: Any,
                 companions: Sequence[EnvSource] = ()) -> None:
        super().__init__(source, artifacts, companions)
        self.children = tuple(self._load_children())
        self.services = tuple(self._load_services())
        self.websites = tuple(self._load_websites())
        self.browser = browser_source(artifacts) if self.websites else None

    def _stored(self, key: str, kind: str, role: str) -> list[tuple[str, EnvSource]]:
        """The stored envs ``key`` names, each checked to be of type ``kind`` (``role`` names
        one in the error): (id as named, source)."""
        found = []
        for child_id in child_ids(self.source.id, self.source.settings, key):
            child = load_env_source(self.artifacts, child_id)
            if child.type != kind:
                raise StepError(f"multi env '{self.source.id}': its {role} '{child_id}' is of "
                                f"type '{child.type}'; {key} are '{kind}' envs")
            found.append((child_id, child))
        return found

    def _load_children(self) -> list[EnvSource]:
        if not child_ids(self.source.id, self.source.settings):
            raise StepError(f"multi env '{self.source.id}' names no env in mcp_server_envs")
        return [child for _, child in self._stored("mcp_server_envs", CHILD_TYPE, "child")]

    def _load_websites(self) -> list[Website]:
        return [Website(child, self.artifacts)
                for _, child in self._stored("website_envs", WEBSITE_TYPE, "website")]

    def _load_services(self) -> list[Service]:
        services: list[Service] = []
        for child_id, child in self._stored("service_envs", SERVICE_TYPE, "service"):
            try:
                settings = service_settings(child.name, child.settings,
                                            f"service env '{child_id}'")
            except ValueError as exc:
                raise StepError(str(exc)) from None
            if any(s.settings.name == settings.name for s in services):
                raise StepError(f"multi env '{self.source.id}': two services are named "
                                f"'{settings.name}' (give one another name in its env.toml)")
            services.append(Service(child, settings))
        return services

    def planned_services(self, labels: dict[str, str],
                         env_state: EnvStateChoice | None) -> list[PlannedService]:
        """The env state's store (if asked for), every ``service_envs`` service and every
        website's backend and frontend."""
        from agent_env.api import ContainerSpec

        sites = [p for site in self.websites for p in site.planned(labels, env_state)]
        return [*super().planned_services(labels, env_state), *sites, *(PlannedService(
            ContainerSpec(name=service.settings.name, image="",
                          env=dict(service.settings.environment),
                          command=service.settings.command,
                          labels={**labels, ENV_LABEL: service.source.id},
                          healthcheck=service.settings.healthcheck,
                          volumes=service.settings.volumes),
            service.source, None, service.source.id, service.source.version)
            for service in self.services)]

    @classmethod
    def command(cls) -> Any:
        """``agent-env env multi put/validate``."""
        from agentenv_mcp_env.cli import multi

        return multi

    def with_companions(self, sources: Sequence[EnvSource]) -> MultiEnv:
        raise StepError("with_envs: a multi env names its envs itself (mcp_server_envs)")

    @property
    def environment_name(self) -> str:
        return str(self.source.settings.get("name") or self.source.environment_name
                   or self.source.name)

    @property
    def servers(self) -> tuple[EnvServer, ...]:
        """Each child as container ``env-<its name>``; with websites, their browser."""
        browser = (EnvServer(self.browser, BROWSER_CONTAINER),) if self.browser else ()
        return (*named_servers(self.children), *browser)

    async def _build_env(self, sandbox: Sandbox, source: EnvSource, say: Any) -> str:
        return await build_shipped_browser(sandbox, source, say) \
            or await super()._build_env(sandbox, source, say)

    def server_env(self, server: EnvServer, site_token: str | None) -> dict[str, str]:
        """The browser sends the site token (it opens the website pages only) with its page
        requests."""
        if server.container != BROWSER_CONTAINER:
            return {}
        return {"AGENTENV_WEBSITE_TOKEN": site_token or ""}

    def state_env(self, server: EnvServer, env_state: EnvStateChoice | None) -> dict[str, str]:
        if server.container == BROWSER_CONTAINER:
            return {}
        return super().state_env(server, env_state)

    def state_names(self) -> list[str]:
        return [*(s.environment_name for s in self.servers
                  if s.container != BROWSER_CONTAINER), *(w.name for w in self.websites)]

    def gateway_websites(self) -> list[str]:
        return [site.gateway_arg() for site in self.websites]

    def shown_containers(self) -> list[str]:
        return [c for site in self.websites for c in (site.backend, site.frontend)]

    def website_records(self, services: Sequence[EnvServerRecord],
                        ) -> tuple[EnvServerRecord, ...]:
        return tuple(r for site in self.websites for r in site.record(services))

    def reattached(self, entry: Any, token: str, sandbox: Sandbox) -> Any:
        deployment = super().reattached(entry, token, sandbox)
        servers = tuple(s for s in deployment.servers if s.container != BROWSER_CONTAINER)
        return attrs.evolve(deployment, servers=servers,
                            websites=tuple(site.reattached() for site in self.websites))

    @classmethod
    def served_names(cls, source: EnvSource, artifacts: Any) -> list[str]:
        """Its children's and websites' names (what environment data seeds)."""
        try:
            env = cls(source, artifacts)
        except StepError:  # a child no longer stored: it serves nothing
            return []
        return env.state_names()

    @classmethod
    def referenced_envs(cls, env_id: str, settings: dict[str, Any]) -> list[str]:
        return [*child_ids(env_id, settings), *child_ids(env_id, settings, "service_envs"),
                *child_ids(env_id, settings, "website_envs")]

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        where = f"{env.label}/env.toml"
        settings = env.settings
        problems = unknown_key_problems(env, KEYS, "multi")
        problems += policy_problems(where, settings)
        provider = settings.get("env_provider_type", "gateway")
        if provider != "gateway":
            problems.append(f"{where}: env_provider_type {provider!r}: a multi env deploys "
                            "through the gateway here ('gateway')")
        if "name" in settings and (not isinstance(settings["name"], str)
                                   or not settings["name"].strip()):
            problems.append(f"{where}: name must be a non-empty string")
        names = settings.get("mcp_server_envs")
        if not isinstance(names, list) or not names or \
                not all(isinstance(n, str) and n for n in names):
            problems.append(f"{where}: mcp_server_envs must list the envs it deploys "
                            '(names of the bundle\'s envs, or stored env ids): ["a", "b"]')
            return problems
        if len(set(names)) != len(names):
            problems.append(f"{where}: mcp_server_envs names an env twice")
        ours = {e.name: e for e in bundle.envs}
        for name in names:
            if "/" in name:
                continue  # a stored env: read when the env deploys
            child = ours.get(name)
            if child is None:
                known = ", ".join(sorted(n for n, e in ours.items() if e.type == CHILD_TYPE))
                problems.append(f"{where}: mcp_server_envs names '{name}', which is not an env "
                                f"of this bundle (its mcp_server envs: {known or 'none'})")
            elif child.type != CHILD_TYPE:
                problems.append(f"{where}: mcp_server_envs names '{name}', an env of type "
                                f"'{child.type}'; a multi env's children are '{CHILD_TYPE}' "
                                "envs (a multi env cannot hold another)")
        return problems + _service_problems(where, settings.get("service_envs"), ours) \
            + _website_problems(where, settings.get("website_envs"), ours)


def _website_problems(where: str, names: object, ours: dict[str, Any]) -> list[str]:
    """What is wrong with ``website_envs``: not a list of names, or a name that is no website
    env of the bundle."""
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        return [f"{where}: website_envs must list website envs (names of the bundle's envs, "
                'or stored env ids): ["shop"]']
    problems = []
    for name in names:
        child = ours.get(name) if "/" not in name else None
        if "/" not in name and (child is None or child.type != WEBSITE_TYPE):
            known = ", ".join(sorted(n for n, e in ours.items() if e.type == WEBSITE_TYPE))
            what = "not an env of this bundle" if child is None else \
                f"an env of type '{child.type}'"
            problems.append(f"{where}: website_envs names '{name}', {what} (its website envs: "
                            f"{known or 'none'})")
    return problems


def _service_problems(where: str, names: object, ours: dict[str, Any]) -> list[str]:
    """What is wrong with ``service_envs``: not a list of names, a name that is no service env
    of the bundle, two services with one host name."""
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        return [f"{where}: service_envs must list service envs (names of the bundle's envs, "
                'or stored env ids): ["db"]']
    problems, hosts = [], {}
    for name in names:
        if "/" in name:
            continue
        child = ours.get(name)
        if child is None or child.type != SERVICE_TYPE:
            known = ", ".join(sorted(n for n, e in ours.items() if e.type == SERVICE_TYPE))
            what = "not an env of this bundle" if child is None else \
                f"an env of type '{child.type}'"
            problems.append(f"{where}: service_envs names '{name}', {what} (its service envs: "
                            f"{known or 'none'})")
            continue
        host = child.settings.get("name", name.lower())
        if host in hosts:
            problems.append(f"{where}: service_envs '{hosts[host]}' and '{name}' are both "
                            f"named '{host}' on the env's network")
        hosts[host] = name
    return problems


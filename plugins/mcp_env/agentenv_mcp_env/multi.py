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

What the reference's multi env also has and this one refuses by name at preflight:
``website_envs`` (a website env deploys on its own, with its browser) and an
``env_provider_type`` other than ``gateway``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from agent_env.api import EnvSource, StepError, load_env_source
from agentenv_mcp_env.deployment import (
    ENV_LABEL,
    EnvServer,
    McpServerEnv,
    PlannedService,
    named_servers,
    policy_problems,
    unknown_key_problems,
)
from agentenv_mcp_env.service import ServiceSettings, service_settings

if TYPE_CHECKING:
    from agent_env.api import EnvStateChoice

KEYS = ("mcp_server_envs", "service_envs", "website_envs", "name", "env_provider_type",
        "network_policy")
CHILD_TYPE = "mcp_server"
SERVICE_TYPE = "service"


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

    def _load_children(self) -> list[EnvSource]:
        ids = child_ids(self.source.id, self.source.settings)
        if not ids:
            raise StepError(f"multi env '{self.source.id}' names no env in mcp_server_envs")
        children = []
        for child_id in ids:
            child = load_env_source(self.artifacts, child_id)
            if child.type != CHILD_TYPE:
                raise StepError(f"multi env '{self.source.id}': its child '{child_id}' is of "
                                f"type '{child.type}'; mcp_server_envs are '{CHILD_TYPE}' envs")
            children.append(child)
        return children

    def _load_services(self) -> list[Service]:
        services: list[Service] = []
        for child_id in child_ids(self.source.id, self.source.settings, "service_envs"):
            child = load_env_source(self.artifacts, child_id)
            if child.type != SERVICE_TYPE:
                raise StepError(f"multi env '{self.source.id}': its service '{child_id}' is of "
                                f"type '{child.type}'; service_envs are '{SERVICE_TYPE}' envs")
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
        """The env state's store (if asked for) and every ``service_envs`` service."""
        from agent_env.api import ContainerSpec

        return [*super().planned_services(labels, env_state), *(PlannedService(
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
        """Each child as container ``env-<its name>``."""
        return tuple(named_servers(self.children))

    @classmethod
    def served_names(cls, source: EnvSource, artifacts: Any) -> list[str]:
        """Its children's environment names (the servers environment data seeds)."""
        try:
            return [s.environment_name for s in cls(source, artifacts).servers]
        except StepError:  # a child no longer stored: it serves nothing
            return []

    @classmethod
    def referenced_envs(cls, env_id: str, settings: dict[str, Any]) -> list[str]:
        return [*child_ids(env_id, settings), *child_ids(env_id, settings, "service_envs")]

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        where = f"{env.label}/env.toml"
        settings = env.settings
        problems = unknown_key_problems(env, KEYS, "multi")
        if settings.get("website_envs"):
            problems.append(f"{where}: website_envs: a multi env does not hold websites yet; "
                            "deploy the website env on its own (its browser comes with it)")
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
        return problems + _service_problems(where, settings.get("service_envs"), ours)


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


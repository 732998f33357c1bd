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

What the reference's multi env also has and this one refuses by name at preflight:
``website_envs`` (the website env type is not installed) and an ``env_provider_type`` other
than ``gateway``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from agent_env.api import EnvSource, StepError, load_env_source
from agentenv_mcp_env.deployment import EnvServer, McpServerEnv, named_servers

KEYS = ("mcp_server_envs", "website_envs", "name", "env_provider_type")
CHILD_TYPE = "mcp_server"


def child_ids(env_id: str, settings: dict[str, Any]) -> list[str]:
    """The children's env ids: a bare name is an env of the same bundle (an id beside this
    env's own), anything with a ``/`` a stored env's id."""
    root = env_id.rsplit("/", 1)[0]
    names = settings.get("mcp_server_envs") or []
    return [str(n) if "/" in str(n) else f"{root}/{n}" for n in names if isinstance(n, str)]


class MultiEnv(McpServerEnv):
    """Every env of ``mcp_server_envs`` behind one gateway (see the module)."""

    name: ClassVar[str] = "multi"

    def __init__(self, source: EnvSource, artifacts: Any,
                 companions: Sequence[EnvSource] = ()) -> None:
        super().__init__(source, artifacts, companions)
        self.children = tuple(self._load_children())

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
    def referenced_envs(cls, env_id: str, settings: dict[str, Any]) -> list[str]:
        return child_ids(env_id, settings)

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        where = f"{env.label}/env.toml"
        settings = env.settings
        problems = []
        unknown = sorted(set(settings) - set(KEYS))
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(unknown)} (a multi env "
                            f"takes: {', '.join(KEYS)}, environment_name, id, type)")
        if settings.get("website_envs"):
            problems.append(f"{where}: website_envs: the website env type is not installed "
                            "here; a multi env deploys mcp_server envs")
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
        return problems

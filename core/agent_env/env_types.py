"""The env-type contract: how an env of one ``type`` deploys, and what a deployed env exposes.

A bundle's ``envs/<name>/`` folder is stored as a versioned entity (kind ``envs``) whose
``env.toml`` names its ``type``. The kernel's ``deploy_env`` step loads that
:class:`EnvSource`, looks the type up in the env-type registry (``agent_env_env_types``),
creates a VM-like sandbox through the sandbox-provider contract and hands both to
:meth:`EnvType.deploy`. What comes back is an :class:`EnvDeployment`: agents and verifiers use
its URL, token, sandbox and internal URL without knowing which plugin deployed it.

So a new env type is one class: subclass :class:`EnvType`, give it a ``name`` and a
``deploy``, and return it from ``agent_env_env_types``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

# light on purpose: `agent-env env` reads DEFAULT_TTL_SECONDS at CLI start, so the step and
# store modules are imported where they are used

if TYPE_CHECKING:
    import click

    from agent_env.sandbox.base import Sandbox
    from agent_env.tasks.context import TaskContext

#: The type of an env whose ``env.toml`` names none (as bundles written for one MCP server
#: per env expect).
DEFAULT_ENV_TYPE = "mcp_server"
#: Provider names read differently for env deploys: envs are container images, and the local
#: folder sandbox cannot run them, so "this machine" (``local``) means its Docker.
ENV_PROVIDER_ALIASES = {"local": "docker"}
DEFAULT_TTL_SECONDS = 3 * 3600
DEFAULT_READY_TIMEOUT = 120.0
#: How an env's gateway runs tool calls: ``performance`` side by side, ``consistent`` one at a
#: time in arrival order (for envs whose state a concurrent call could see half-changed).
GATEWAY_MODES = ("performance", "consistent")
DEFAULT_GATEWAY_MODE = "performance"
#: The disk a ``deploy_env`` asks for when it names none (what providers that size disks use).
DEFAULT_DISK_SIZE_GB = 10.0
#: What an env's servers may reach outside its sandbox (``deploy_env``'s ``network_policy``,
#: an ``env.toml``'s, ``[envs] network_policy``): ``none`` (nothing: the default) or ``open``
#: (a route out). ``registries`` (an allow-list of package hosts) is refused: it needs a
#: filtering proxy this installation does not have.
ENV_NETWORK_POLICIES = ("none", "open")
DEFAULT_ENV_NETWORK_POLICY = "none"


def network_policy_problem(policy: object) -> str | None:
    """What is wrong with an env ``network_policy`` value, or None (None itself is fine)."""
    if policy is None or policy in ENV_NETWORK_POLICIES:
        return None
    why = (": an allow-list of package hosts needs a filtering proxy, not here yet"
           if policy == "registries" else "")
    return f"network_policy must be one of {', '.join(ENV_NETWORK_POLICIES)}, not {policy!r}{why}"

Progress = Callable[[str], None]


@attrs.frozen
class EnvSource:
    """A stored env at one version: its settings and file table (path -> meta)."""

    id: str
    version: int
    name: str
    type: str
    environment_name: str | None
    image: str | None
    files: dict[str, dict[str, Any]] = attrs.field(factory=dict, repr=False)
    #: The env.toml keys its type reads (see :attr:`EnvType.bundle_problems`).
    settings: dict[str, Any] = attrs.field(factory=dict)


class EnvDeployment(Protocol):
    """What a deployed env exposes, whichever env type deployed it.

    A type whose servers take data (``load_artifact`` of an ``environment`` or
    ``environment_universe`` artifact, see :mod:`agent_env.env_data`) also has
    ``environment_names() -> list[str]`` (the servers it can seed) and
    ``async load_environment(name, file: ArtifactFile)`` (seed that one server: ``data/reset``,
    then ``data/add`` of the file). A type without them refuses such a load by name.

    A type that can tell when its containers stop also has ``async watch() -> str | None``:
    it returns why the env went down (a server exited) as soon as it notices, and the run ends
    as an infra error there and then (``deploy_env`` starts it; the run cancels it at its end).
    """

    env_id: str
    instance_id: str
    #: What clients call it (an MCP server's name).
    environment_name: str
    #: Its base URL as this machine reaches it (no token in it).
    url: str
    #: The bearer token its clients send (never recorded).
    token: str
    expires_at: str
    #: The sandbox it runs in (agents deployed beside it join it).
    sandbox: Sandbox | None

    @property
    def mcp_url(self) -> str:
        """An MCP URL that needs no headers (the token travels in it)."""
        ...

    @property
    def internal_url(self) -> str:
        """Its base URL as a container in the same sandbox reaches it."""
        ...

    @property
    def headers(self) -> dict[str, str]:
        """What a client sends with every request (the bearer token)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the run record keeps: everything but the token."""
        ...

    def step_output(self) -> dict[str, Any]:
        """What ``deploy_env`` records as its output (``url``, ``instance_id``...)."""
        ...

    def urls(self) -> dict[str, str]:
        """Its addresses by name (``env deploy`` prints them and the deployments ledger
        keeps them): ``{"mcp": ..., "gateway": ...}`` for an MCP env."""
        ...

    def client_configs(self) -> list[tuple[str, str, Any]]:
        """Ready-to-paste client configs as (key, title, config): ``env deploy`` prints each
        under its title (``--json``: under its key). They hold the token: never stored."""
        ...


class EnvType:
    """Base of the classes ``agent_env_env_types`` contributes: one per env ``type``."""

    #: The ``type`` an ``env.toml`` names.
    name: ClassVar[str] = ""
    #: Envs of this type are gateways: not deployed on their own, but named by a run's
    #: ``--gateway-env-id`` (``env deploy --gateway``) to stand in front of the envs it
    #: deploys in place of the built-in gateway.
    is_gateway: ClassVar[bool] = False
    #: The env state types (``deploy_env``'s ``env_state_type``, see :mod:`agent_env.env_state`)
    #: this type deploys a store of; ``deploy`` then gets ``env_state``.
    env_state_types: ClassVar[tuple[str, ...]] = ()
    #: The env state types whose store envs of this type are (``env service-db put``): not
    #: deployed on their own, but named by a run's ``--service-db-env-id`` (``env deploy
    #: --service-db``) for every env state it deploys of one of these types to run.
    serves_env_state: ClassVar[tuple[str, ...]] = ()
    #: Whether ``deploy`` takes ``network_policy`` (:data:`ENV_NETWORK_POLICIES`), passed only
    #: when a deploy step names one; a type without it refuses a step that does.
    takes_network_policy: ClassVar[bool] = False

    def __init__(self, source: EnvSource, artifacts: Any) -> None:
        self.source = source
        self.artifacts = artifacts

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        """What is wrong with ``env`` (a bundle's :class:`~agent_env.bundles.model.EnvEntry`
        of this type) before anything runs: its env.toml keys beyond the kernel's
        (``env.settings``), the other envs of ``bundle`` it names. A type that reads no key of
        its own refuses any."""
        if env.settings:
            return [f"{env.label}/env.toml: unknown key(s) {', '.join(sorted(env.settings))} "
                    f"(an env of type '{cls.name}' takes: environment_name, id, image, type)"]
        return []

    @classmethod
    def referenced_envs(cls, env_id: str, settings: dict[str, Any]) -> list[str]:
        """The ids of the other envs an env of this type deploys (a ``multi`` env's
        children): a run stores them with it."""
        return []

    @classmethod
    def served_names(cls, source: EnvSource, artifacts: Any) -> list[str]:
        """The environment names a deployment of ``source`` can seed (environment data is
        routed by them): one server's own name, unless the type deploys several."""
        return [source.environment_name or source.name]

    @classmethod
    def from_spec(cls, source: EnvSource, artifacts: Any) -> EnvType:
        """The env ``source`` names, its files read through ``artifacts``' stores."""
        return cls(source, artifacts)

    def with_companions(self, sources: Sequence[EnvSource]) -> EnvType:
        """The env with ``sources`` deployed beside it (``deploy_env``'s ``with_envs``)."""
        from agent_env.tasks.steps import StepError

        raise StepError(f"with_envs: envs of type '{self.name}' cannot share a deployment")

    @classmethod
    def command(cls) -> click.Group | Sequence[click.Group] | None:
        """Commands this env type adds under ``agent-env env`` (``mcp-server put``...), one
        group or several; looked up only when ``env`` runs one or lists them."""
        return None

    async def deploy(self, ctx: TaskContext, sandbox: Sandbox, *, ttl_seconds: int,
                     ready_timeout: float, progress: Progress,
                     gateway_mode: str = DEFAULT_GATEWAY_MODE) -> EnvDeployment:
        """Bring the env up in ``sandbox`` (a fresh VM-like one; the run tears it down) and wait
        until it answers within ``ready_timeout``; ``progress`` takes lines for people. A type
        with a gateway runs its tool calls as ``gateway_mode`` says (:data:`GATEWAY_MODES`).
        A type with :attr:`env_state_types` also takes ``env_state`` (an
        :class:`~agent_env.env_state.EnvStateChoice`), passed only when a deploy asks for one."""
        raise NotImplementedError(f"env type '{self.name}' does not implement deploy()")

    def state_names(self) -> list[str]:
        """What a state store of this env keeps apart (one schema each): its servers'
        environment names. Recorded with a durable instance by ``env init-env-state``."""
        return []

    @classmethod
    async def release_env_state(cls, instance: Any) -> None:
        """Remove what the durable env state ``instance`` keeps (``env teardown-env-state``);
        its record is dropped after. A type without env state has nothing to remove."""
        return None


def env_stores(artifacts: Any) -> tuple[Any, Any]:
    """The versioned and object stores: the run's own (``StoredArtifacts``), else the config's."""
    versioned = getattr(artifacts, "versioned", None)
    objects = getattr(artifacts, "objects", None)
    if versioned is None or objects is None:
        from agent_env.runtime import current

        versioned, objects = current().versioned_store, current().object_store
    return versioned, objects


def load_env_source(artifacts: Any, env_id: str, version: int | None = None) -> EnvSource:
    """The stored env ``env_id`` (latest, or ``version``); StepError when it is not stored."""
    from agent_env.tasks.steps import StepError

    versioned, _ = env_stores(artifacts)
    record = versioned.get("envs", env_id, version)
    if record is None:
        at = f" v{version}" if version else ""
        raise StepError(f"no env '{env_id}'{at} is stored")
    body = record.body
    return EnvSource(
        env_id, record.version, str(body.get("name") or env_id.rsplit("/", 1)[-1]),
        str(body.get("type") or DEFAULT_ENV_TYPE), body.get("environment_name"),
        body.get("image"), dict(body.get("files") or {}), dict(body.get("settings") or {}),
    )


def write_env_files(artifacts: Any, source: EnvSource, folder: Path) -> None:
    """Write ``source``'s files under ``folder`` with their modes (a build context)."""
    from agent_env.bundles.entities import write_stored_files
    from agent_env.tasks.steps import StepError

    _, objects = env_stores(artifacts)
    try:
        write_stored_files(objects, source.files, folder, f"env {source.id}")
    except ValueError as exc:
        raise StepError(str(exc)) from None


def env_provider_chain(ctx: TaskContext, sandbox_type: str | None) -> list[str]:
    """The providers to try for an env: the run's chain with ``local`` read as ``docker``."""
    chain = [ENV_PROVIDER_ALIASES.get(name, name)
             for name in ctx.provider_chain(sandbox_type, role="env")]
    return list(dict.fromkeys(chain))

"""The ``mcp_server`` env type: an env server behind the gateway, through the sandbox contract.

What one deployment is, in a VM-like sandbox of any provider (docker, smol_vm, clouds):

* the env image, built from the stored env's build context (content-hash tag, so an unchanged
  env is a lookup, not a build, and the progress says ``envs/<name>: image <ref> (cached)``),
  run as container ``env`` on the sandbox's private network with ``MCP_HOST=0.0.0.0``,
  ``MCP_PORT=18765`` and ``ENVIRONMENT_NAME``; it publishes nothing. Companion envs
  (``deploy_env``'s ``with_envs``) run the same way as ``env-<name>``, behind the same gateway;
* the gateway image (:mod:`.gateway_image`), run as container ``gateway`` with one ``--child``
  per env server and a fresh random token (``AGENTENV_GATEWAY_TOKEN``); only its port is
  published, and the host reaches it on the URL the provider returns. The env servers are
  ``ContainerSpec(private=True)`` only, so on a provider that isolates (docker, the VM
  providers) nothing but the gateway reaches them; one that cannot says so in the run record
  (``sandbox.env_isolation``) and in a warning line;
* readiness: the gateway answers ``/ready`` (every child up, no tool-name clash), its card has a
  name (and so does every child's), and ``tools/list`` through it names at least one tool. A
  clash refuses the deploy at once; anything else not ready by the timeout fails with the
  containers' last log lines.

The token is registered with the run context as a secret (records show ``****``) and handed to
verifiers inside a capability URL (``<gateway>/t/<token>/mcp``), which a stock MCP client can use
without headers. The provider's sandbox teardown removes the containers and the networks.
When a verifier fails, :func:`why_down` tells an env that died mid-run from a wrong answer.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import secrets
import string
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from agent_env.api import (
    DEFAULT_GATEWAY_MODE,
    DEFAULT_READY_TIMEOUT,
    DEFAULT_TTL_SECONDS,
    EnvSource,
    EnvType,
    InfraError,
    StepError,
    build_with_progress,
    cause,
    write_env_files,
)
from agentenv_mcp_env.gateway_image import (
    GATEWAY_PORT,
    IMAGE_NAME,
    gateway_command,
    write_gateway_context,
)
from agentenv_mcp_env.sources import scratch_folder

if TYPE_CHECKING:
    from agent_env.api import ArtifactFile, EnvStateChoice, Sandbox, TaskContext

ENV_PORT = 18765
ENV_CONTAINER = "env"
GATEWAY_CONTAINER = "gateway"
LOG_LINES = 30
#: How often a deployment's containers are looked at while a run uses it (``watch``): a server
#: that dies ends the run within this (plus one status probe), not at the next tool call.
WATCH_SECONDS = 0.5
ENV_LABEL = "agentenv.env"
INSTANCE_LABEL = "agentenv.env_instance"


class DeployError(InfraError):
    """A deploy failed; the message says why and carries the containers' last log lines.

    An env that never came up means the run did not happen: ``error``, not a score of 0."""


def new_instance_id(env_id: str) -> str:
    """``<env_id>-<8 random>`` (lowercase letters and digits), as the reference names them."""
    alphabet = string.ascii_lowercase + string.digits
    return f"{env_id}-{''.join(secrets.choice(alphabet) for _ in range(8))}"


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")


@attrs.frozen
class EnvServerRecord:
    """An env server of a deployment as the run record keeps it."""

    env_id: str
    env_version: int
    container: str
    image: str
    #: What its server is called (``ENVIRONMENT_NAME``): environment data is routed by it.
    environment_name: str | None = None


@attrs.frozen
class GatewayDeployment:
    """One deployed env: where its gateway is, its token (never stored) and when it expires."""

    env_id: str
    env_version: int
    instance_id: str
    environment_name: str
    #: The gateway's base URL as the host reaches it (no token in it).
    url: str
    token: str = attrs.field(repr=False)
    image: str
    gateway_image: str
    created_at: str
    expires_at: str
    tools: tuple[str, ...] = ()
    sandbox: Sandbox | None = attrs.field(default=None, repr=False, eq=False)
    #: Every env server behind the gateway (the env itself first, then ``with_envs``).
    servers: tuple[EnvServerRecord, ...] = ()
    #: The service containers beside them (a ``multi`` env's ``service_envs``).
    services: tuple[EnvServerRecord, ...] = ()
    #: The websites behind the gateway (a ``website`` env's): each its backend container
    #: (also among ``services``), which environment data seeds by the website's name.
    websites: tuple[EnvServerRecord, ...] = ()
    #: The env state it deployed with: ``{"type", "instance_id"}`` (None: none).
    env_state: dict[str, Any] | None = None
    #: What its servers could reach outside (``none`` or ``open``).
    network_policy: str = "none"

    @property
    def capability_url(self) -> str:
        """The gateway base URL with the token in the path: every route works under it."""
        return f"{self.url}/t/{self.token}"

    @property
    def mcp_url(self) -> str:
        """What verifiers and agents get: an MCP URL that needs no headers."""
        return f"{self.capability_url}/mcp"

    @property
    def internal_url(self) -> str:
        """The gateway as a container in the same sandbox reaches it (by container name)."""
        return f"http://{GATEWAY_CONTAINER}:{GATEWAY_PORT}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def urls(self) -> dict[str, str]:
        """The MCP endpoint and the gateway (the deployments ledger keeps them), and the env
        state's ``db_mcp`` endpoint when it has one."""
        from agentenv_mcp_env.state import DB_MCP

        extra = ({"db_mcp": f"{self.url}/env/{DB_MCP}/mcp"}
                 if any(s.container == DB_MCP for s in self.services) else {})
        for site in self.websites:
            extra[f"website_{site.environment_name}"] = \
                f"{self.url}/website/{site.environment_name}/"
        return {"mcp": f"{self.url}/mcp", "gateway": self.url, **extra}

    def client_configs(self) -> list[tuple[str, str, Any]]:
        """MCP client configs that reach this env with its token (printed, never stored)."""
        mcp_url = f"{self.url}/mcp"
        return [
            ("mcp_client_config", "MCP client config (mcpServers, streamable HTTP: Claude "
             "Code .mcp.json, Cursor):", client_config(self.environment_name, mcp_url,
                                                       self.token)),
            ("claude_desktop_config", "Claude Desktop (claude_desktop_config.json, through "
             "npx mcp-remote):", desktop_config(self.environment_name, mcp_url, self.token)),
        ]

    async def watch(self) -> str | None:
        """Why the env went down (a server, service or the gateway no longer running), as soon
        as a look every :data:`WATCH_SECONDS` sees it; None at once where the sandbox cannot
        tell. A paused container (``docker commit`` pauses one) is not down."""
        if self.sandbox is None:
            return None
        watched = [*(("env server", s.container) for s in self.servers),
                   *(("service", s.container) for s in self.services),
                   ("gateway", GATEWAY_CONTAINER)]
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            for role, container in watched:
                status = await _status(self.sandbox, container)
                if status is None and role == "gateway":
                    return None  # this sandbox cannot tell: nothing to watch
                if status is not None and status.startswith(("exited", "dead", "gone")):
                    return f"{role} {container} stopped mid-run ({status})"

    def environment_names(self) -> list[str]:
        """The servers environment data can seed, by name (see :mod:`.seeding`)."""
        return [s.environment_name for s in (*self.servers, *self.websites)
                if s.environment_name]

    async def load_environment(self, name: str, file: ArtifactFile) -> None:
        """Seed server (or website) ``name`` with ``file``: ``data/reset``, then ``data/add``
        of it."""
        from agentenv_mcp_env.seeding import seed_server, seed_website

        site = next((s for s in self.websites if s.environment_name == name), None)
        if site is not None:
            await seed_website(self, site, file)
        else:
            await seed_server(self, name, file)

    def step_output(self) -> dict[str, Any]:
        """``deploy_env``'s output: where it is, its tools and the image of each server."""
        return {"instance_id": self.instance_id, "url": self.url,
                "expires_at": self.expires_at, "tools": list(self.tools),
                "images": {s.env_id: s.image for s in self.servers}}

    def describe(self) -> dict[str, Any]:
        """What the run record keeps: everything but the token."""
        return {
            "env_id": self.env_id, "env_version": self.env_version,
            "instance_id": self.instance_id, "environment_name": self.environment_name,
            "url": self.url, "image": self.image, "gateway_image": self.gateway_image,
            "created_at": self.created_at, "expires_at": self.expires_at,
            "tools": list(self.tools),
            "servers": [attrs.asdict(server) for server in self.servers],
            "services": [attrs.asdict(service) for service in self.services],
            "websites": [attrs.asdict(site) for site in self.websites],
            "env_state": self.env_state, "network_policy": self.network_policy,
            "sandbox": sandbox_record(self.sandbox) if self.sandbox is not None else None,
        }


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


def sandbox_record(sandbox: Sandbox) -> dict[str, Any]:
    """The sandbox as the run record keeps it, with ``env_isolation``: true when the env servers
    are reachable only through the gateway, else the provider's reason they are not."""
    reason = sandbox.env_isolation()
    return {**sandbox.describe(), "env_isolation": True if reason is None else reason}


@attrs.frozen
class Readiness:
    """What the readiness checks saw: the gateway's card and the tools it serves."""

    card: dict[str, Any]
    tools: tuple[str, ...]


@attrs.frozen
class EnvServer:
    """One env server of a deployment: its stored source and its container's name (and alias
    on the sandbox's private network)."""

    source: EnvSource
    container: str

    @property
    def environment_name(self) -> str:
        return self.source.environment_name or self.source.name

    @property
    def url(self) -> str:
        return f"http://{self.container}:{ENV_PORT}"


Progress = Callable[[str], None]


def _quiet(line: str) -> None:
    pass


class McpServerEnv(EnvType):
    """An env that serves MCP (and the agentenv data plane) from a Docker build context.

    ``companions`` are more envs deployed behind the same gateway (``deploy_env``'s
    ``with_envs``): one flat tool namespace over all of them, so a tool name served twice
    refuses the deploy, as the gateway rules.
    """

    name: ClassVar[str] = "mcp_server"
    #: :mod:`agentenv_mcp_env.state`
    env_state_types: ClassVar[tuple[str, ...]] = ("local_postgres",)
    takes_network_policy: ClassVar[bool] = True
    #: The env.toml keys it reads beyond the kernel's.
    settings_keys: ClassVar[tuple[str, ...]] = ("network_policy",)

    def __init__(self, source: EnvSource, artifacts: Any,
                 companions: Sequence[EnvSource] = ()) -> None:
        super().__init__(source, artifacts)
        self.companions = tuple(companions)

    @classmethod
    def bundle_problems(cls, env: Any, bundle: Any) -> list[str]:
        where = f"{env.label}/env.toml"
        unknown = sorted(set(env.settings) - set(cls.settings_keys))
        if unknown:
            return [f"{where}: unknown key(s) {', '.join(unknown)} (an env of type "
                    f"'{cls.name}' takes: environment_name, id, image, network_policy, type)"]
        return policy_problems(where, env.settings)

    def network_policy(self, asked: str | None) -> str:
        """The deploy's, else the env.toml's, else ``[envs] network_policy``, else none."""
        from agent_env.api import DEFAULT_ENV_NETWORK_POLICY, current, network_policy_problem

        configured = current().config.section("envs").get("network_policy")
        policy = asked or self.source.settings.get("network_policy") or configured \
            or DEFAULT_ENV_NETWORK_POLICY
        problem = network_policy_problem(policy)
        if problem:
            raise StepError(problem)
        return str(policy)

    @classmethod
    def command(cls) -> Any:
        """``agent-env env mcp-server put/validate``."""
        from agentenv_mcp_env.cli import mcp_server

        return mcp_server

    def with_companions(self, sources: Sequence[EnvSource]) -> McpServerEnv:
        return type(self)(self.source, self.artifacts, sources)

    @property
    def environment_name(self) -> str:
        return self.source.environment_name or self.source.name

    @property
    def servers(self) -> tuple[EnvServer, ...]:
        """The env servers: the env itself as container ``env``, companions as ``env-<name>``."""
        return (EnvServer(self.source, ENV_CONTAINER), *named_servers(self.companions))

    async def _build_env(self, sandbox: Sandbox, source: EnvSource, say: Progress) -> str:
        if source.image:
            say(f"envs/{source.name}: image {source.image} (given)")
            return str(source.image)
        with scratch_folder("agent-env-env-") as env_dir:
            await asyncio.to_thread(write_env_files, self.artifacts, source, env_dir)
            return await build_with_progress(sandbox, str(env_dir), source.name,
                                             {ENV_LABEL: source.id}, f"envs/{source.name}", say)

    async def build_images(self, sandbox: Sandbox, *, progress: Progress | None = None,
                           gateway: EnvSource | None = None) -> tuple[list[str], str]:
        """Build (or find) every env image and the gateway's, side by side; returns the env refs
        (in :attr:`servers` order) and the gateway's: the built-in one, or ``gateway``'s (a
        stored ``gateway_server`` env the run chose)."""
        say = progress or _quiet
        with scratch_folder("agent-env-gateway-") as gateway_dir:
            if gateway is not None:
                gateway_build = self._build_env(sandbox, gateway, say)
            else:
                write_gateway_context(gateway_dir)
                gateway_build = build_with_progress(sandbox, str(gateway_dir), IMAGE_NAME,
                                                    {"agentenv.role": "gateway"}, "gateway",
                                                    say)
            refs = await asyncio.gather(
                *(self._build_env(sandbox, server.source, say) for server in self.servers),
                gateway_build)
        return list(refs[:-1]), refs[-1]

    async def deploy(
        self,
        ctx: TaskContext,
        sandbox: Sandbox,
        *,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        progress: Progress | None = None,
        gateway_mode: str = DEFAULT_GATEWAY_MODE,
        env_state: EnvStateChoice | None = None,
        network_policy: str | None = None,
    ) -> GatewayDeployment:
        """Run the env servers and their gateway in ``sandbox`` and wait until they are ready
        (``[plugins.agentenv-framework-mcp-env] progress = false`` drops the image lines);
        with ``env_state``, its store first (:mod:`agentenv_mcp_env.state`). With
        ``network_policy`` ``open`` its servers and services have a route out."""
        from agent_env.api import ContainerSpec
        from agentenv_mcp_env.settings import mcp_env_settings

        if not mcp_env_settings().progress:
            progress = None

        started = time.time()
        policy = self.network_policy(network_policy)
        instance_id = new_instance_id(self.source.id)
        token = secrets.token_urlsafe(32)
        ctx.register_secret(token)
        # websites: their pages are opened with a token of their own (see the gateway's auth)
        site_token = secrets.token_urlsafe(32) if self.gateway_websites() else None
        if site_token:
            ctx.register_secret(site_token)
        env_refs, gateway_ref = await self.build_images(sandbox, progress=progress,
                                                        gateway=chosen_gateway(ctx,
                                                                               self.artifacts))
        exposed = sandbox.env_isolation()
        if exposed is not None:
            (progress or _quiet)(f"envs/{self.source.name}: warning: {exposed}")
        labels = {ENV_LABEL: self.source.id, INSTANCE_LABEL: instance_id}
        planned = self.planned_services(labels, env_state)
        if policy == "open":  # the env's own services go out as its servers do; the store not
            planned = [attrs.evolve(p, spec=attrs.evolve(p.spec, outbound=True))
                       if not p.store else p for p in planned]
        services = await start_services(sandbox, planned, timeout=ready_timeout,
                                        env_name=self.environment_name,
                                        progress=progress or _quiet,
                                        build=lambda p: self._build_planned(sandbox, p, progress))
        specs = [ContainerSpec(
            name=server.container, image=ref,
            env={"MCP_HOST": "0.0.0.0", "MCP_PORT": str(ENV_PORT),
                 "ENVIRONMENT_NAME": server.environment_name,
                 **self.state_env(server, env_state), **self.server_env(server, site_token)},
            labels={**labels, ENV_LABEL: server.source.id}, outbound=policy == "open",
        ) for server, ref in zip(self.servers, env_refs, strict=True)]
        specs.append(ContainerSpec(
            name=GATEWAY_CONTAINER, image=gateway_ref,
            env={"AGENTENV_GATEWAY_TOKEN": token,
                 **({"AGENTENV_WEBSITE_TOKEN": site_token} if site_token else {})},
            command=gateway_command([server.url for server in self.servers],
                                    name=self.environment_name, ready_timeout=ready_timeout,
                                    mode=gateway_mode, asides=asides(services),
                                    websites=self.gateway_websites(),
                                    internal_url=f"http://{GATEWAY_CONTAINER}:{GATEWAY_PORT}"),
            publish=(GATEWAY_PORT,), labels=labels,
        ))
        # Side by side: the gateway waits for its children anyway, so order buys nothing. All
        # starts finish (or fail) before an error goes up, so teardown sees every container.
        outcomes = await asyncio.gather(*(sandbox.run_container(spec) for spec in specs),
                                        return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        urls = outcomes[-1]
        assert isinstance(urls, dict)
        url = urls.get(GATEWAY_PORT)
        if not url:
            raise DeployError(f"the '{sandbox.provider_name}' sandbox published no URL for the "
                              f"gateway's port {GATEWAY_PORT}")
        url = url.rstrip("/")
        # The timeout counts from the containers' start: a cold build may take minutes.
        ready = await wait_ready(url, token, ready_timeout, sandbox=sandbox,
                                 env_name=self.environment_name,
                                 containers=[*(s.container for s in self.servers),
                                             *self.shown_containers()])
        return GatewayDeployment(
            env_id=self.source.id, env_version=self.source.version, instance_id=instance_id,
            environment_name=self.environment_name, url=url, token=token, image=env_refs[0],
            gateway_image=gateway_ref, created_at=_utc(started),
            expires_at=_utc(started + ttl_seconds), tools=ready.tools, sandbox=sandbox,
            servers=tuple(EnvServerRecord(s.source.id, s.source.version, s.container, ref,
                                          s.environment_name)
                          for s, ref in zip(self.servers, env_refs, strict=True)),
            services=services, websites=self.website_records(services),
            network_policy=policy,
            env_state=(None if env_state is None else
                       {"type": env_state.state_type,
                        "instance_id": env_state.instance.instance_id
                        if env_state.instance is not None else None}),
        )

    def reattached(self, entry: Any, token: str, sandbox: Sandbox) -> GatewayDeployment:
        """This env's deployment ``entry`` (a ledger record) as another process reaches it: the
        ledger's gateway URL with ``token`` (never stored: its caller has it), ``sandbox``
        attached again, and the servers this env starts (what ``env ... load-*`` seeds)."""
        return GatewayDeployment(
            env_id=self.source.id, env_version=self.source.version,
            instance_id=entry.instance_id, environment_name=self.environment_name,
            url=entry.urls.get("gateway", "").rstrip("/"), token=token, image="",
            gateway_image="", created_at=entry.created_at.isoformat(),
            expires_at=entry.expires_at.isoformat(), sandbox=sandbox,
            servers=tuple(EnvServerRecord(s.source.id, s.source.version, s.container, "",
                                          s.environment_name) for s in self.servers))

    # -- what a type deploying more than MCP servers adds (a website's) ----------------------

    def server_env(self, server: EnvServer, site_token: str | None) -> dict[str, str]:
        """More environment for ``server``'s container (``site_token``: the token that opens
        the gateway's website pages, when the env has websites)."""
        return {}

    def gateway_websites(self) -> list[str]:
        """The gateway's ``--website`` values (see :mod:`agentenv_protocol.websites`)."""
        return []

    def shown_containers(self) -> list[str]:
        """More containers whose last log lines a deploy that failed shows (a website's)."""
        return []

    def website_records(self, services: Sequence[EnvServerRecord],
                        ) -> tuple[EnvServerRecord, ...]:
        """Which of the started ``services`` are websites' backends (seeded by name)."""
        return ()

    # -- services: containers the env servers need up first ----------------------------------

    def planned_services(self, labels: dict[str, str],
                         env_state: EnvStateChoice | None) -> list[PlannedService]:
        """The env state's store, when the deploy asked for one (a ``multi`` env adds its
        ``service_envs``)."""
        if env_state is None:
            return []
        from agent_env.api import load_env_source
        from agentenv_mcp_env.settings import mcp_env_settings
        from agentenv_mcp_env.state import (
            CONTEXT,
            DB_MCP_CONTEXT,
            db_mcp_spec,
            schemas,
            servicedb_spec,
        )

        spec = servicedb_spec(schemas(self.state_names()), labels, env_state.instance)
        if env_state.store_env:  # --service-db-env-id: a stored store, at its latest version
            store = load_env_source(self.artifacts, env_state.store_env)
            planned = [PlannedService(spec, store, None, store.id, store.version, store=True)]
        else:
            planned = [PlannedService(spec, None, CONTEXT, f"env-state:{env_state.state_type}",
                                      0, store=True)]
        if mcp_env_settings().db_mcp:
            planned.append(PlannedService(db_mcp_spec(labels), None, DB_MCP_CONTEXT,
                                          "env-state:db-mcp", 0, store=True))
        return planned

    async def _build_planned(self, sandbox: Sandbox, planned: PlannedService,
                             progress: Progress | None) -> str:
        say = progress or _quiet
        if callable(planned.context):  # a builder of its own (a website's backend)
            return str(await planned.context(sandbox, say))
        if planned.source is not None:
            return await self._build_env(sandbox, planned.source, say)
        assert planned.context is not None
        return await build_with_progress(sandbox, str(planned.context), planned.spec.name,
                                         {"agentenv.role": "service"},
                                         f"services/{planned.spec.name}", say)

    def state_names(self) -> list[str]:
        return [server.environment_name for server in self.servers]

    def state_env(self, server: EnvServer, env_state: EnvStateChoice | None) -> dict[str, str]:
        """``DATABASE_URL`` (its own schema) for a server of an env with a state store."""
        if env_state is None:
            return {}
        from agentenv_mcp_env.state import database_url

        return {"DATABASE_URL": database_url(server.environment_name),
                "AGENTENV_ENV_STATE_TYPE": env_state.state_type}

    @classmethod
    async def release_env_state(cls, instance: Any) -> None:
        """Remove a durable store's volume from the engine of its provider."""
        from agent_env.api import open_provider
        from agentenv_mcp_env.state import volume_name

        await open_provider(instance.provider).remove_volume(volume_name(instance.instance_id))


def unknown_key_problems(env: Any, keys: Sequence[str], what: str) -> list[str]:
    """An env.toml key its type does not read, named with the keys it does."""
    unknown = sorted(set(env.settings) - set(keys))
    if not unknown:
        return []
    return [f"{env.label}/env.toml: unknown key(s) {', '.join(unknown)} (a {what} env takes: "
            f"{', '.join(keys)}, environment_name, id, type)"]


def policy_problems(where: str, settings: dict[str, Any]) -> list[str]:
    """What is wrong with an env.toml's ``network_policy`` (the kernel's one check)."""
    from agent_env.api import network_policy_problem

    problem = network_policy_problem(settings.get("network_policy"))
    return [f"{where}: {problem}"] if problem else []


@attrs.frozen
class PlannedService:
    """A service to start before the env servers: its spec (image set once built) and what to
    build it from (a stored env, a build-context folder, or an ``async (sandbox, say) -> ref``
    builder of its own)."""

    spec: Any
    source: EnvSource | None
    context: Any
    record_id: str
    record_version: int
    #: The env state's store (never given a route out, whatever the env's policy).
    store: bool = False


async def start_services(sandbox: Sandbox, planned: Sequence[PlannedService], *,
                         timeout: float, env_name: str, progress: Progress,
                         build: Callable[[PlannedService], Any],
                         ) -> tuple[EnvServerRecord, ...]:
    """Build and start ``planned`` side by side, then wait until each is healthy (or running,
    without a healthcheck); a service that exits or turns unhealthy fails the deploy at once
    with its last log lines."""
    if not planned:
        return ()
    refs = await asyncio.gather(*(build(p) for p in planned))
    specs = [attrs.evolve(p.spec, image=ref) for p, ref in zip(planned, refs, strict=True)]
    outcomes = await asyncio.gather(*(sandbox.run_container(spec) for spec in specs),
                                    return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    await wait_services(sandbox, specs, timeout, env_name, progress)
    return tuple(EnvServerRecord(p.record_id, p.record_version, spec.name, spec.image)
                 for p, spec in zip(planned, specs, strict=True))


#: How often a deploy looks at its services while they start.
SERVICE_POLL = 0.1


async def wait_services(sandbox: Sandbox, specs: Sequence[Any], timeout: float, env_name: str,
                        progress: Progress) -> None:
    """Until every service is healthy (with a healthcheck) or running (without one)."""
    deadline = time.monotonic() + timeout
    waiting = {spec.name: spec for spec in specs}
    while waiting:
        for name, spec in list(waiting.items()):
            status = await sandbox.container_status(name)
            health = await sandbox.container_health(name) if spec.healthcheck else None
            # a sandbox that cannot tell health (None) is judged on running; one that can tell
            # nothing at all, on having started
            ready = health == "healthy" if health is not None else status in (None, "running")
            if status is not None and status.startswith(("exited", "dead", "gone")):
                why = f"stopped before it was ready ({status})"
            elif health == "unhealthy":
                why = "is unhealthy (its healthcheck failed)"
            elif ready:
                progress(f"envs/{env_name}: service {name} ready")
                del waiting[name]
                continue
            elif time.monotonic() > deadline:
                why = f"was not healthy within {timeout:.0f}s"
            else:
                continue
            logs = (await sandbox.container_logs(name, tail=LOG_LINES)).rstrip()
            raise DeployError(f"env {env_name}: service {name} {why}\n--- last log lines of "
                              f"the {name} container ---\n{logs or '(no output)'}")
        if waiting:
            await asyncio.sleep(SERVICE_POLL)



def asides(services: Sequence[EnvServerRecord]) -> dict[str, str]:
    """The gateway's ``--aside`` servers among ``services``: the env state's db-mcp."""
    from agentenv_mcp_env.state import DB_MCP, DB_MCP_PORT

    return {s.container: f"http://{s.container}:{DB_MCP_PORT}" for s in services
            if s.container == DB_MCP}


def chosen_gateway(ctx: TaskContext, artifacts: Any) -> EnvSource | None:
    """The stored gateway env the run chose (``--gateway-env-id``), or None for the built-in
    gateway; StepError when it is not a gateway env."""
    env_id = ctx.choices.gateway_env
    if not env_id:
        return None
    from agent_env.api import load_env_source

    source = load_env_source(artifacts, env_id)
    if source.type != "gateway_server":
        raise StepError(f"--gateway-env-id {env_id}: an env of type '{source.type}', not "
                        "gateway_server")
    return source


#: How often the ready-wait asks whether a container has exited (a probe costs an inspect).
EXIT_CHECK_SECONDS = 0.5


def named_servers(sources: Sequence[EnvSource]) -> list[EnvServer]:
    """Each source as container ``env-<its name>``, the names made unique (and never ``env``
    or ``gateway``): what the other servers of the env reach it by."""
    taken = {ENV_CONTAINER, GATEWAY_CONTAINER}
    servers = []
    for source in sources:
        name = f"{ENV_CONTAINER}-{_slug(source.name)}"
        while name in taken:
            name += "-2"
        taken.add(name)
        servers.append(EnvServer(source, name))
    return servers


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return slug or "env"


async def wait_ready(
    url: str, token: str, timeout: float, *, sandbox: Sandbox | None = None,
    env_name: str = "env", containers: Sequence[str] = (ENV_CONTAINER,),
) -> Readiness:
    """Gateway ``/ready``, a card with a name, tools listed; a clash fails at once.

    On timeout the error carries the gateway's view of its children (``/state``) and the last
    log lines of the env and gateway containers.
    """
    import aiohttp

    from agentenv_protocol.client import McpClient, fetch_card_raw
    from agentenv_protocol.errors import TransportError

    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + timeout
    next_look = time.monotonic() + EXIT_CHECK_SECONDS
    delay = 0.01
    last = "the gateway did not answer"
    probe = aiohttp.ClientTimeout(total=2)
    async with aiohttp.ClientSession(headers=headers) as http:
        while True:
            try:
                async with http.get(f"{url}/ready", timeout=probe) as resp:
                    status = resp.status
                    body = await resp.json(content_type=None) if status in (200, 503) else {}
                if status == 200:
                    break
                if status == 401:
                    raise DeployError(f"the gateway of {env_name} refused its own token")
                clashes = (body or {}).get("clashes") or {}
                if clashes:
                    named = "; ".join(f"'{tool}' served by {', '.join(owners)}"
                                      for tool, owners in sorted(clashes.items()))
                    raise DeployError(
                        f"deploy of {env_name} refused: tool-name clash ({named}); a tool name "
                        "may be served by one env server only"
                    )
                last = f"waiting for {', '.join((body or {}).get('waiting') or ['the env'])}"
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                last = f"the gateway did not answer ({cause(exc)})"
            if time.monotonic() > next_look:  # a container that exited will never be ready
                next_look = time.monotonic() + EXIT_CHECK_SECONDS
                stopped = await _stopped(sandbox, [*containers, GATEWAY_CONTAINER])
                if stopped:
                    raise DeployError(await _not_ready_message(
                        env_name, None, stopped, sandbox, containers))
            if time.monotonic() > deadline:
                state = await _gateway_state(http, url)
                raise DeployError(await _not_ready_message(
                    env_name, timeout, last + state, sandbox, containers))
            await asyncio.sleep(delay)
            # A refused connection costs microseconds: poll finely, every ready-wait was
            # paying up to a 0.1 s step after the gateway came up.
            delay = min(delay * 1.5, 0.025)

        async def list_tools() -> tuple[str, ...]:
            async with McpClient(f"{url}/mcp", headers=headers, session=http,
                                 client_name="agentenv-deploy") as client:
                return tuple(t["name"] for t in await client.list_tools_raw())

        card_or_error, tools_or_error = await asyncio.gather(
            fetch_card_raw(url, headers=headers, session=http), list_tools(),
            return_exceptions=True)
        if isinstance(card_or_error, TransportError):
            raise DeployError(f"{env_name}: the gateway serves no usable card: "
                              f"{card_or_error}") from None
        if isinstance(card_or_error, BaseException):
            raise card_or_error
        card = card_or_error
        unnamed = [i for i, child in enumerate(card.get("children_environments") or [])
                   if not (isinstance(child, dict) and child.get("name"))]
        if unnamed:
            raise DeployError(f"{env_name}: the env server's card has no name")
        if isinstance(tools_or_error, asyncio.CancelledError):
            raise tools_or_error
        if isinstance(tools_or_error, BaseException):  # a failed exchange fails readiness
            raise DeployError(f"{env_name}: tools/list through the gateway failed: "
                              f"{tools_or_error}") from None
        tools = tools_or_error
    if not tools:
        raise DeployError(f"{env_name}: the env server lists no tools")
    return Readiness(card, tools)


async def _gateway_state(http: Any, url: str) -> str:
    """The children's errors as the gateway saw them, for a timeout message (best effort)."""
    import aiohttp

    try:
        async with http.get(f"{url}/state", timeout=aiohttp.ClientTimeout(total=2)) as resp:
            state = await resp.json(content_type=None)
    except Exception:  # only decoration for an error message
        return ""
    errors = [f"{c.get('url')}: {c.get('error')}" for c in state.get("children") or []
              if c.get("error")]
    return f"; gateway says: {'; '.join(errors)}" if errors else ""


async def _stopped(sandbox: Sandbox | None, containers: Sequence[str]) -> str | None:
    """``container env: exited with code 3`` for the first container that is no longer up,
    where the sandbox can tell (``Sandbox.container_status``)."""
    if sandbox is None:
        return None
    for container in containers:
        status = await _status(sandbox, container)  # a probe: the timeout still judges
        if status is not None and status.startswith(("exited", "dead")):
            return f"container {container}: {status}"
    return None


async def _not_ready_message(
    env_name: str, timeout: float | None, reason: str, sandbox: Sandbox | None,
    containers: Sequence[str] = (ENV_CONTAINER,),
) -> str:
    lines = [f"env {env_name} was not ready within {timeout:.0f}s ({reason})"
             if timeout is not None else f"env {env_name} stopped before it was ready ({reason})"]
    if sandbox is not None:
        for container in (*containers, GATEWAY_CONTAINER):
            try:
                logs = (await sandbox.container_logs(container, tail=LOG_LINES)).rstrip()
            except Exception as exc:  # the logs are a courtesy
                logs = f"(could not read its logs: {exc})"
            lines.append(f"--- last log lines of the {container} container ---")
            lines.append(logs or "(no output)")
    return "\n".join(lines)


async def why_down(env: GatewayDeployment) -> str | None:
    """Why a deployed env cannot serve any more, or None when it looks healthy.

    Asked after a verifier fails, so that "the env container died mid-run" reads as that and not
    as a wrong answer: the gateway must answer, and every env server must answer ``/ready``
    through the gateway's pass-through. The container's state (when the provider can say) and
    its last log lines are added.
    """
    import aiohttp

    probe = aiohttp.ClientTimeout(total=3)
    problems: list[str] = []
    async with aiohttp.ClientSession() as http:
        try:
            async with http.get(f"{env.capability_url}/state", timeout=probe) as resp:
                state = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            problems.append(f"its gateway does not answer ({cause(exc)})")
            state = None
        children = [c for c in (state or {}).get("children") or [] if isinstance(c, dict)]
        for index, child in enumerate(children):
            name = str(child.get("name") or f"env{index}")
            try:
                async with http.get(f"{env.capability_url}/env/{name}/ready",
                                    timeout=probe) as resp:
                    if resp.status < 500:
                        continue
                    body = await resp.json(content_type=None)
                    error = (((body or {}).get("error") or {}).get("message")
                             or f"HTTP {resp.status}")
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                error = cause(exc)
            problems.append(f"env server {name} does not answer ({error})")
    for service in env.services:
        status = await _status(env.sandbox, service.container)
        if status is not None and status != "running":
            problems.append(f"service {service.container}: {status}")
    if not problems:
        return None
    containers = [s.container for s in (*env.servers, *env.services)] or [ENV_CONTAINER]
    details = await _container_details(env.sandbox, [*containers, GATEWAY_CONTAINER])
    return "; ".join(problems) + details


async def _status(sandbox: Sandbox | None, container: str) -> str | None:
    """A container's status where the sandbox can tell; None when it cannot (or the probe
    failed): a probe never fails what asked for it."""
    if sandbox is None:
        return None
    try:
        return await sandbox.container_status(container)
    except Exception:  # a probe for an error message
        return None


async def _container_details(sandbox: Sandbox | None, containers: Sequence[str]) -> str:
    """``; container env: exited with code 137`` and the last log lines (best effort)."""
    if sandbox is None:
        return ""
    parts, logs = [], []
    for container in containers:
        status = await _status(sandbox, container)  # decoration for an error message
        if status is not None and status != "running":
            parts.append(f"container {container}: {status}")
        try:
            tail = (await sandbox.container_logs(container, tail=10)).rstrip()
        except Exception:
            tail = ""
        if tail and container != GATEWAY_CONTAINER:
            logs.append(f"--- last log lines of the {container} container ---\n{tail}")
    text = "".join(f"; {part}" for part in parts)
    return text + ("\n" + "\n".join(logs) if logs else "")

"""The sandbox-provider contract every provider implements (local, docker, smol_vm, clouds).

A *provider* creates *sandboxes*: either a VM-like host able to run Docker (``mode="vm"``) or a
single container (``mode="container"``). Env types and steps only ever talk to this contract, so
``deploy_env`` works the same on every provider and no plugin imports another.

The rules a provider keeps (checked by the provider conformance suite):

* ``exec`` returns exit code, stdout and stderr; exit code ``-1`` means the transport was lost;
* ``put_file``/``get_file`` copy files in and out; paths are inside the sandbox;
* ``expose(port)`` gives a URL the host can reach;
* ``terminate`` is idempotent and never raises for an already-gone sandbox;
* ``provider.attach(sandbox_id)`` finds a sandbox again from its id alone (after a crash);
* a request the provider cannot honour (a network policy, a mode) is refused with
  :class:`SandboxUnsupported` and a message saying what it cannot do.

A capability beyond the contract, for forked episodes (:mod:`agent_env.episodes.fork`): a sandbox
whose ``can_commit`` is true saves its env servers' files as images
(:meth:`Sandbox.commit_containers`), and another sandbox of the same provider starts those
containers from them (:meth:`Sandbox.start_from_committed`). docker has it; the rest do not.

Network policies are named: ``None`` (the provider's default) and ``"no-internet"`` (no route
out of the sandbox). A provider lists the ones it enforces in ``network_policies``.

The conformance suite every provider runs is :mod:`agent_env.testing.provider_conformance`.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar

import attrs

from agent_env._tuples import int_tuple, str_tuple
from agent_env.errors import UserError

T = TypeVar("T")


class SandboxError(Exception):
    """A sandbox operation failed."""


class SandboxUnsupported(UserError):
    """The provider cannot do what was asked; the message says what and what to use instead."""


class PathOutsideSandbox(UserError):
    """A path would escape the sandbox (``../``, an absolute path elsewhere, a symlink out)."""


@attrs.frozen
class ExecResult:
    """What a command did: ``exit_code`` -1 when the transport to the sandbox was lost."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def lost(self) -> bool:
        """The sandbox stopped answering (it died, or its service ended it): what the command
        would have done is unknown, so a check must not read this as a failure."""
        return self.exit_code == -1


@attrs.frozen
class SandboxSpec:
    """What a step asks for. ``image`` is ignored by providers that have no images (local)."""

    name: str
    mode: str = attrs.field(default="vm", validator=attrs.validators.in_(("vm", "container")))
    image: str | None = None
    cpu: float | None = None
    memory_mb: int | None = None
    disk_mb: int | None = None
    ttl_seconds: int | None = None
    ports: tuple[int, ...] = attrs.field(default=(), converter=int_tuple)
    env_vars: dict[str, str] = attrs.field(factory=dict)
    network_policy: str | None = None
    labels: dict[str, str] = attrs.field(factory=dict)  # includes agentenv.run


@attrs.frozen
class Healthcheck:
    """How a container says it is ready (Docker's healthcheck, as compose spells it).

    Why the sandbox contract has it: a service that is not an env server (a database beside an
    app) has no ``/ready`` to poll, so the deploy waits for ``healthy`` instead.
    ``test`` is ``("CMD", argv...)`` or ``("CMD-SHELL", "a shell line")``.
    """

    test: tuple[str, ...] = attrs.field(converter=str_tuple)
    interval: float = 5.0
    timeout: float = 5.0
    retries: int = 3
    start_period: float = 0.0

    def __attrs_post_init__(self) -> None:
        if len(self.test) < 2 or self.test[0] not in ("CMD", "CMD-SHELL"):
            raise ValueError("a healthcheck's test is ('CMD', argv...) or ('CMD-SHELL', line)")

    @property
    def shell_line(self) -> str:
        """The test as one shell line (what ``docker run --health-cmd`` takes)."""
        import shlex

        return self.test[1] if self.test[0] == "CMD-SHELL" else shlex.join(self.test[1:])


@attrs.frozen
class VolumeMount:
    """A named volume of the sandbox mounted at ``path``: containers that mount the same name
    share its files; the sandbox's teardown removes it.

    A ``durable`` one is not the sandbox's: it keeps ``name`` as it is on the engine, outlives
    the sandbox, and a later sandbox of the same provider that mounts it finds its files (a
    durable env state); :meth:`SandboxProvider.remove_volume` removes it. A provider whose
    engine dies with the sandbox refuses it."""

    name: str
    path: str
    read_only: bool = False
    durable: bool = False


#: The memory a container gets when neither its spec nor its sandbox's names a size (MiB):
#: a container without a limit can take the machine (a model gateway keeping 30 MB requests,
#: an agent's runaway process), so every provider that can limit containers limits them all.
DEFAULT_MEMORY_MB = 4096


@attrs.frozen
class ContainerSpec:
    """A container to run inside a VM-like sandbox.

    A sandbox has two networks, on which containers reach each other by ``name``:

    * the *private* one (``private=True``, the default): env servers and the gateway in front
      of them. It has no route out, and nothing outside it (the host, other sandboxes, the
      sandbox's other containers) can reach its members, so an env server is reached only
      through a gateway that is on both networks. The default is the safe one for env servers;
    * the *edge* one: containers that publish ports (Docker publishes only through a network
      with a route out) or ask for ``egress`` (a model gateway calling its upstream). It has a
      route out of the sandbox.

    ``publish`` ports are the only ones reachable from the host (on 127.0.0.1). An agent with
    ``network_policy = "open"`` is ``private=False``: on the edge only, it reaches the env's
    gateway and the world but not the env servers. A provider that cannot keep the private
    network closed says so in ``describe()`` (``env_isolation``).

    A third network, the *sealed* one, is for agents (``sealed=True``, which takes no
    ``publish``, ``egress`` or ``private``): a sealed container's only peers are the sandbox's
    publishing containers (the env gateway, the model gateway, agent fronts) and its
    ``sealed_peer`` ones (an egress proxy), and it has no route out and no address on the host.
    That holds whatever the order: a publishing container started beside the first sealed one
    (an agent type starts an agent, its front and the model gateway at once) is its peer too.
    Why: an agent runs code a model wrote, so by default it may reach its tools and its model
    and nothing else. A provider that cannot do this says so in
    :meth:`Sandbox.agent_isolation`.
    """

    name: str
    image: str
    env: dict[str, str] = attrs.field(factory=dict)
    command: tuple[str, ...] | None = None
    publish: tuple[int, ...] = attrs.field(default=(), converter=int_tuple)
    labels: dict[str, str] = attrs.field(factory=dict)
    #: On the private network (env servers and their gateway).
    private: bool = True
    #: Needs a route out of the sandbox (the host's services, the internet): on the edge network.
    egress: bool = False
    #: On the sealed network only (an agent): it reaches the publishing containers, nothing else.
    sealed: bool = False
    #: Also on the sealed network though it publishes nothing, so sealed containers reach it
    #: (an allow-listed agent's egress proxy, which has a route out). Takes ``egress``; a
    #: provider that seals containers honours it too.
    sealed_peer: bool = False
    #: A private container that may also reach outside (an env whose network policy is
    #: ``open``): it joins the sandbox's *outbound* network too, which has a route out and
    #: holds nothing but such containers (no gateway, no agent). A private container without
    #: it has no route out, and a provider that can makes its lookups of outside names fail at
    #: once rather than time out.
    outbound: bool = False
    #: Its memory limit in MiB; None: its sandbox's ``memory_mb``, else :data:`DEFAULT_MEMORY_MB`.
    memory_mb: int | None = None
    #: How it says it is ready (:meth:`Sandbox.container_health` reports it); None: no check.
    healthcheck: Healthcheck | None = None
    #: Named volumes of the sandbox it mounts (a provider that has none refuses the spec).
    volumes: tuple[VolumeMount, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.sealed and (self.publish or self.egress or self.private or self.outbound):
            raise ValueError(f"container '{self.name}': a sealed container takes no publish, "
                             "egress, outbound or private (it reaches only the sandbox's "
                             "gateways)")
        if self.sealed_peer and (self.sealed or self.private or not self.egress):
            raise ValueError(f"container '{self.name}': a sealed peer is an edge container "
                             "with egress (private=False, egress=True), not sealed itself")
        if self.outbound and not self.private:
            raise ValueError(f"container '{self.name}': outbound is for private containers "
                             "(others reach out through the edge network: egress)")

    @property
    def edge(self) -> bool:
        """On the edge network: it publishes, goes out, or is not private (it needs a network)."""
        return not self.sealed and (bool(self.publish) or self.egress or not self.private)


@attrs.frozen
class CommittedImage:
    """A container's files saved as an image by :meth:`Sandbox.commit_containers`."""

    #: The container's ``ContainerSpec.name`` (the same in every deployment of an env).
    container: str
    #: The image it had been started from.
    source_image: str
    #: The saved image.
    ref: str


class Sandbox(abc.ABC):
    """A running sandbox. Methods are async because most providers talk over a network."""

    id: str
    provider_name: str
    #: True when :meth:`commit_containers`, :meth:`start_from_committed` and
    #: :meth:`remove_committed` work (a capability: most providers have no image store to share
    #: between sandboxes).
    can_commit: ClassVar[bool] = False

    @abc.abstractmethod
    async def exec(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``command`` (a string goes through ``bash -c``) and wait for it."""

    @abc.abstractmethod
    async def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write ``data`` at ``path`` inside the sandbox, creating parent folders."""

    @abc.abstractmethod
    async def get_file(self, path: str) -> bytes:
        """Read the file at ``path`` inside the sandbox (``FileNotFoundError`` if absent)."""

    @abc.abstractmethod
    async def expose(self, port: int) -> str:
        """A URL (``http://host:port``) on which the host reaches ``port`` of the sandbox.

        Some providers can only expose ports named when the sandbox was created
        (``SandboxSpec.ports``); they refuse others with :class:`SandboxUnsupported`.
        """

    @abc.abstractmethod
    async def terminate(self) -> None:
        """Stop and remove the sandbox and what it holds. Idempotent; never raises if gone."""

    # -- VM-like sandboxes (mode "vm") also run containers; env types deploy through these --

    async def build_image(self, context: str, tag: str, *, labels: dict[str, str]) -> str:
        """Build (or reuse) an image from a build-context folder; returns the ref to run.

        A ``tag`` without ``:`` is a name the provider completes with a content hash, so the
        same sources give the same ref and are not rebuilt; always run the returned ref.
        """
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot build images")

    async def run_container(self, spec: ContainerSpec) -> dict[int, str]:
        """Start a container; returns ``{published port: URL reachable from the host}``."""
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot run containers")

    async def container_logs(self, name: str, *, tail: int = 50) -> str:
        """The last ``tail`` log lines of a container (for error messages)."""
        return ""

    async def container_status(self, name: str) -> str | None:
        """How a container is: ``running``, ``exited with code 3``, ``gone``...; None when this
        sandbox cannot tell. Env types and agents ask it to say why a server stopped answering
        (and to stop waiting for one that exited)."""
        return None

    async def put_container_file(self, name: str, path: str, data: bytes, *,
                                 mode: int = 0o644) -> None:
        """Write ``data`` at ``path`` (absolute) inside container ``name`` with ``mode``,
        creating its folders: how an env server gets the file a ``data/add`` then names
        (``file://``), and an agent the files ``load_artifact`` gives it. A sandbox that cannot
        raises :class:`SandboxUnsupported`."""
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot write files into "
                                 "its containers")

    async def container_exec(self, name: str, command: str | list[str], *,
                             cwd: str | None = None, env: dict[str, str] | None = None,
                             timeout: float | None = None,
                             user: str | None = None) -> ExecResult:
        """Run ``command`` (a string goes through :func:`shell_argv`) inside container ``name`` as
        ``user`` (default: the image's) and wait for it; a timeout is exit code 124. How a task
        works in a container it started (``run_docker_container``'s ``container_name``): its
        tests, its files. A sandbox that cannot raises :class:`SandboxUnsupported`."""
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot run commands in "
                                 "its containers")

    async def get_container_file(self, name: str, path: str) -> bytes:
        """Read the file at ``path`` (absolute) inside container ``name``
        (``FileNotFoundError`` if absent)."""
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot read files from "
                                 "its containers")

    async def container_health(self, name: str) -> str | None:
        """``healthy``, ``unhealthy`` or ``starting`` for a container started with a
        ``healthcheck``; None when it has none or this sandbox cannot tell (then being up is
        all a deploy can wait for)."""
        return None

    # -- committed containers (``can_commit``): forked episodes start from one warmed env --

    async def commit_containers(self, *, labels: dict[str, str]) -> tuple[CommittedImage, ...]:
        """Save the files of the env servers this sandbox runs as images carrying ``labels``.

        Env servers are the containers :meth:`run_container` started on the private network
        only (``not spec.edge``); a gateway (it publishes) and agents are not saved: a fork
        starts fresh ones, with tokens and trajectories of their own. What is saved is each
        container's filesystem as it is now, not its processes' memory.
        """
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot commit containers "
                                 "to images")

    def start_from_committed(self, images: Sequence[CommittedImage]) -> None:
        """From now on, :meth:`run_container` starts a spec named like one of ``images``'
        containers, and asking for its source image, from the committed image instead."""
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot start containers "
                                 "from committed images")

    def started_from_committed(self) -> frozenset[str]:
        """The committed images :meth:`run_container` has started containers from."""
        return frozenset()

    async def remove_committed(self, images: Sequence[CommittedImage]) -> None:
        """Remove committed images once no container uses them; one already gone is no error.
        Works after :meth:`terminate`."""
        raise SandboxUnsupported(f"the '{self.provider_name}' sandbox cannot remove committed "
                                 "images")

    def env_isolation(self) -> str | None:
        """None when private containers (env servers) are reachable only from the sandbox's
        private network, i.e. through their gateway; else a one-line reason they are not. An
        env's run record keeps it beside ``describe()``."""
        return (f"the '{self.provider_name}' sandbox does not isolate env servers: anything "
                "that reaches the sandbox may reach them without the gateway's token")

    def agent_isolation(self) -> str | None:
        """None when :meth:`run_container` can seal a container (``ContainerSpec.sealed``), else
        a one-line reason it cannot (an agent type then refuses a sealed agent, naming it)."""
        return (f"the '{self.provider_name}' sandbox cannot seal a container's network (it has "
                "no network that reaches only the gateways)")

    def describe(self) -> dict[str, Any]:
        """What a run record keeps to find this sandbox again (no secrets)."""
        return {"id": self.id, "provider": self.provider_name}


class SandboxProvider(abc.ABC):
    """Creates and finds sandboxes. Contributed through ``agent_env_sandbox_providers``."""

    name: ClassVar[str]
    #: The modes this provider can create; others are refused with SandboxUnsupported.
    modes: ClassVar[tuple[str, ...]] = ("vm", "container")
    #: The network policies this provider enforces; any other is refused.
    network_policies: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_config(cls, **settings: Any) -> SandboxProvider:
        """Build the provider from ``[sandbox.providers.<name>.config]``.

        Not overridden, the constructor's keyword parameters are the settings, and the kernel
        checks the table against them; override it only to take fewer (say, to keep test
        hooks of the constructor out of the config).
        """
        return cls(**settings)

    @classmethod
    def availability(cls) -> str | None:
        """None when usable on this host, else a one-line reason (for fallback chains)."""
        return None

    @abc.abstractmethod
    async def create(self, spec: SandboxSpec) -> Sandbox:
        """Create and start a sandbox; on failure, leave nothing behind."""

    @abc.abstractmethod
    async def attach(self, sandbox_id: str) -> Sandbox | None:
        """Find a sandbox from its id alone, or None if it no longer exists."""

    async def list_sandboxes(self, labels: dict[str, str]) -> list[Sandbox]:
        """Sandboxes carrying all ``labels`` (for ``agent-env gc``).

        A provider whose service cannot filter by label returns an empty list: gc then cannot
        find its leftovers, and their TTL is the only cleanup.
        """
        return []

    async def prune_build_leftovers(self, *, older_than: float, dry_run: bool) -> list[str]:
        """Remove what builds killed mid-way left (untagged step images carrying the
        ``agentenv.builder`` label every build sets) once older than ``older_than`` seconds;
        returns one line per item removed (or, with ``dry_run``, that would be). For
        ``agent-env gc``; a provider with no image store of its own has nothing to prune."""
        return []

    async def find_images(self, labels: dict[str, str]) -> list[str] | None:
        """Tags of the images this provider's image store holds that carry every one of
        ``labels`` (``a2a-agent list`` asks whether an agent is built); None when it keeps
        no images of its own, so nothing can be said."""
        return None

    async def remove_committed(self, images: Sequence[CommittedImage]) -> None:
        """Remove committed images no sandbox is up for any more (a snapshot removed): a
        provider whose images outlive its sandboxes implements it."""
        raise SandboxUnsupported(f"the '{self.name}' sandbox provider keeps no images beyond "
                                 "a sandbox")

    async def remove_volume(self, name: str) -> bool:
        """Remove the durable volume ``name`` (:class:`VolumeMount`); False when there was
        none. A provider whose volumes die with their sandbox has none to remove."""
        raise SandboxUnsupported(f"the '{self.name}' sandbox provider keeps no volume beyond "
                                 "a sandbox")

    def check_spec(self, spec: SandboxSpec) -> None:
        """Refuse what this provider cannot do, before creating anything."""
        if spec.mode not in self.modes:
            raise SandboxUnsupported(
                f"the '{self.name}' sandbox provider cannot create mode '{spec.mode}' "
                f"sandboxes (it supports: {', '.join(self.modes)})"
            )
        if spec.network_policy is not None and spec.network_policy not in self.network_policies:
            enforced = ", ".join(self.network_policies) or "none"
            raise SandboxUnsupported(
                f"the '{self.name}' sandbox provider cannot enforce network policy "
                f"'{spec.network_policy}' (it enforces: {enforced})"
            )


async def side_by_side(*calls: Awaitable[T]) -> list[T]:
    """Await ``calls`` at once and ALL of them to the end, then raise the first error.

    Why all: a container still being made when the caller unwinds (another call failed, or
    the run was cancelled) would appear after the teardown listed the sandbox. Cancelled
    meanwhile, it still waits for the calls before re-raising; a second cancellation stops
    the wait."""
    import asyncio

    tasks = [asyncio.ensure_future(call) for call in calls]
    if not tasks:
        return []
    try:
        await asyncio.shield(asyncio.wait(tasks))
    except asyncio.CancelledError:
        await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.exception()  # retrieved: the cancellation is what the caller hears
        raise
    errors = [t.exception() for t in tasks if t.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]
    return [t.result() for t in tasks]


async def build_with_progress(
    sandbox: Sandbox,
    context: str,
    name: str,
    labels: dict[str, str],
    prefix: str,
    say: Callable[[str], None],
) -> str:
    """Build one image in ``sandbox``; its progress lines go to ``say`` as ``prefix: ...``.

    Why here: ``build_image`` may take a ``progress`` callback (docker_env streams build lines
    through it) beyond the contract; every env and agent type builds the same way, so the
    check for it lives once, next to the contract.
    """
    import inspect

    def line(text: str) -> None:
        say(f"{prefix}: {text}")

    try:
        streams = "progress" in inspect.signature(sandbox.build_image).parameters
    except (TypeError, ValueError):
        streams = False
    if streams:
        ref: str = await sandbox.build_image(  # type: ignore[call-arg]
            context, name, labels=labels, progress=line
        )
        return ref
    ref = await sandbox.build_image(context, name, labels=labels)
    line(f"image {ref}")
    return ref


def shell_argv(command: str) -> list[str]:
    """``command`` as an argv that runs it with ``bash -c`` where the image has bash, else
    ``sh -c``: task commands are written for bash, and slim images may lack it."""
    return ["sh", "-c", 'command -v bash >/dev/null 2>&1 && exec bash -c "$1"; exec sh -c "$1"',
            "sh", command]

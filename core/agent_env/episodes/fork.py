"""Forked episodes: the members of a group start from copies of one warmed env.

``spec.start_group(n, warm=..., fork="auto")`` (see :mod:`.group`) starts n episodes whose
``deploy_env`` steps come here. For each ``deploy_env`` step of the task there is one *origin*:

1. the first member to reach the step deploys the origin as the step says, as the group's own
   (labelled with the group's id; its teardown is the group's, never a member's);
2. ``warm(env)`` is awaited on it (a :class:`WarmEnv`): the calls that bring the env to the state
   every member starts from;
3. the state is taken once, one of two ways:

   * **data plane** (``fork="data"``, or ``"auto"`` when every env server behind the gateway
     serves ``data/get``, ``data/add`` and ``data/reset``): the snapshot is the ``data/get``
     answer. With ``"auto"`` it is tried on the origin first (``data/reset``, ``data/add`` of
     it, then ``data/get`` must give the same digest), so an env whose ``@add_data`` does not
     take back what ``@get_data`` gives fails the group at once, by name;
   * **image commit** (``fork="commit"``, or ``"auto"`` otherwise): the origin's sandbox saves
     its env servers' files as images (:meth:`~agent_env.sandbox.base.Sandbox.commit_containers`;
     the docker provider can). A commit keeps files, not process memory: an env that keeps its
     state in memory and offers no ``data/get`` forks as its fresh self;

4. the origin is torn down, and each member deploys its own env as the step says, then:

   * data plane: ``data/reset``, ``data/add`` of the snapshot, and a ``data/get`` whose digest
     must equal the snapshot's (a member whose copy differs fails its step). Members deploy
     while the origin warms, and take their env from the spec's pool with ``reuse_envs``;
   * image commit: the member's sandbox starts the env servers from the committed images (set
     when the step registers its sandbox: :meth:`EpisodeContext.add_sandbox`); a member whose
     env servers did not start from them fails its step. Never through the pool.

5. the committed images are removed when the group is done (every member torn down).

Each member is isolated as an unforked episode is: a sandbox of its own (networks, env
servers, a gateway with its own token and trajectory), so one member's calls change only its
copy. A member's step output records ``fork: {group, how}``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.episodes import last_resort
from agent_env.episodes.errors import EpisodeError
from agent_env.tasks.context import TaskContext
from agent_env.tasks.steps import StepError
from agent_env.tasks.teardown import Teardown

if TYPE_CHECKING:
    from agent_env.episodes.pool import EnvPool
    from agent_env.sandbox.base import CommittedImage, Sandbox
    from agent_env.tasks.steps import Step
    from agentenv_protocol.client import DataPlaneClient, McpClient

DATA_PLANE, IMAGE_COMMIT = "data-plane", "image-commit"
#: What ``fork=`` takes: decide per env, or insist on one way.
FORK_CHOICES = {"auto": None, "data": DATA_PLANE, "commit": IMAGE_COMMIT}
SNAPSHOT_OPERATIONS = frozenset({"data/reset", "data/add", "data/get"})
#: Label on what a group brings up beyond its members' own (its origins, committed images).
GROUP_LABEL = "agentenv.episode_group"
DATA_TIMEOUT_SECONDS = 60.0

Deploy = Callable[["Step", TaskContext], Awaitable[None]]
Warm = Callable[["WarmEnv"], Awaitable[Any]]


class WarmEnv:
    """The origin env, as ``warm`` gets it: its tools over MCP and its data plane.

    ::

        async def warm(env: WarmEnv) -> None:
            async with env.mcp() as client:             # the gateway's MCP, no role
                await client.call_tool("add_item", {"text": "seeded"})
            async with env.data() as data:              # data/add, data/get, data/reset
                await data.add(["more seed"])
    """

    def __init__(self, env_id: str, deployment: Any) -> None:
        self.env_id = env_id
        #: What ``deploy_env`` registered (for the mcp_server type, a gateway deployment).
        self.deployment = deployment

    def __repr__(self) -> str:
        return f"<WarmEnv {self.env_id}>"

    @property
    def url(self) -> str:
        """The gateway's base URL (its routes need :attr:`headers`)."""
        return str(self.deployment.url)

    @property
    def headers(self) -> dict[str, str]:
        return dict(self.deployment.headers)

    def mcp(self, *, timeout: float = 60.0) -> McpClient:
        """An MCP client on the env's gateway: ``async with env.mcp() as client``."""
        from agentenv_protocol.client import McpClient

        return McpClient(f"{self.url}/mcp", headers=self.headers, timeout=timeout,
                         client_name="agentenv-warm")

    def data(self, *, timeout: float = DATA_TIMEOUT_SECONDS) -> DataPlaneClient:
        """The env's data plane through its gateway: ``async with env.data() as data``."""
        from agentenv_protocol.client import DataPlaneClient

        return DataPlaneClient(self.url, headers=self.headers, timeout=timeout)


@attrs.frozen
class Snapshot:
    """What one origin's state was taken as: ``data/get`` parts, or committed images."""

    how: str
    #: data plane: the ``data/get`` answer's parts, on the wire, and its digest
    parts: tuple[Any, ...] = ()
    digest: str | None = None
    #: image commit: the saved env servers
    images: tuple[CommittedImage, ...] = ()


class Origin:
    """One ``deploy_env`` step's warmed env: how it forks (known once it is up) and its
    snapshot (once warmed). Members wait on both, shielded: one member's cancellation never
    cancels the origin the others wait for."""

    def __init__(self, step_id: str) -> None:
        loop = asyncio.get_running_loop()
        self.step_id = step_id
        self.how: asyncio.Future[str] = loop.create_future()
        self.snapshot: asyncio.Future[Snapshot] = loop.create_future()
        self.task: asyncio.Future[None] | None = None

    def fail(self, error: BaseException) -> None:
        for future in (self.how, self.snapshot):
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved here: a member may not be waiting on both


def short_name(env_id: str) -> str:
    """``shelf`` for ``@local/path/to/bundle/shelf``: how messages name an env."""
    return env_id.rsplit("/", 1)[-1]


def digest_of(answer: Any) -> str:
    """sha256 of a ``data/get`` answer as canonical JSON (the pool's verified reset digests
    the same way, so the two compare)."""
    return hashlib.sha256(json.dumps(answer, sort_keys=True, default=str).encode()).hexdigest()


class Forks:
    """A group's origins and what they left (committed images); see the module docstring."""

    def __init__(self, group_id: str, labels: dict[str, str], warm: Warm | None,
                 fork: str) -> None:
        if fork not in FORK_CHOICES:
            raise EpisodeError(f"fork must be one of {', '.join(FORK_CHOICES)}, not {fork!r}")
        self.group_id = group_id
        self.labels = {**labels, GROUP_LABEL: group_id}
        self.warm = warm
        self.wanted = FORK_CHOICES[fork]
        self.origins: dict[str, Origin] = {}
        #: the origins' deploys and the committed images: the group's own teardown
        self.teardown = Teardown()
        self.origin_teardowns: list[asyncio.Future[Any]] = []
        self.closed = False

    def how(self) -> dict[str, str]:
        """``{step id: how it forked}`` for the origins decided so far."""
        return {step_id: origin.how.result() for step_id, origin in self.origins.items()
                if origin.how.done() and not origin.how.exception()}

    # -- a member's deploy_env ------------------------------------------------------------------

    async def deploy_member(self, step: Step, ctx: TaskContext, deploy: Deploy,
                            pool: EnvPool | None) -> None:
        """Give a member (``ctx``) its copy of the step's warmed env."""
        if self.closed:
            raise StepError("the episode group is closed")
        env_id: str = step.env_id  # type: ignore[attr-defined]
        name = short_name(env_id)
        origin = self._origin(step, ctx, deploy)
        how = await asyncio.shield(origin.how)
        if how == DATA_PLANE:
            if pool is not None:
                await pool.lend(step, ctx, deploy)
            else:
                await deploy(step, ctx)
            snapshot = await asyncio.shield(origin.snapshot)
            await load_snapshot(name, ctx.envs[env_id], snapshot)
        else:
            snapshot = await asyncio.shield(origin.snapshot)
            committed: list[CommittedImage] = getattr(ctx, "committed_images", None) or []
            committed.extend(snapshot.images)
            ctx.committed_images = committed  # type: ignore[attr-defined]
            before = set(ctx.sandboxes)
            await deploy(step, ctx)
            started = frozenset().union(*(ctx.sandboxes[name].started_from_committed()
                                          for name in set(ctx.sandboxes) - before))
            missing = [image.ref for image in snapshot.images if image.ref not in started]
            if missing:
                raise StepError(f"env '{name}': its env servers did not start from the warmed "
                                f"images ({', '.join(missing)}); forking by image commit needs "
                                "an env type that runs them through its sandbox's run_container "
                                "on a provider that can commit (docker)")
        output = ctx.outputs.get(step.id)
        if isinstance(output, dict):
            output["fork"] = {"group": self.group_id, "how": how}

    def _origin(self, step: Step, ctx: TaskContext, deploy: Deploy) -> Origin:
        origin = self.origins.get(step.id)
        if origin is None:
            origin = self.origins[step.id] = Origin(step.id)
            origin.task = asyncio.ensure_future(self._make_origin(origin, step, ctx, deploy))
        return origin

    async def _make_origin(self, origin: Origin, step: Step, member: TaskContext,
                           deploy: Deploy) -> None:
        env_id: str = step.env_id  # type: ignore[attr-defined]
        name = short_name(env_id)
        own = TaskContext(task_id=member.task_id, instance_id=f"{self.group_id}-{step.id}",
                          artifacts=member.artifacts, teardown=Teardown(),
                          sandbox_chain=member.sandbox_chain, labels=self.labels)
        last_resort.keep(own.teardown)
        try:
            await deploy(step, own)
            deployment = own.envs[env_id]
            if self.wanted is None:
                how = DATA_PLANE if await _can_snapshot(deployment) else IMAGE_COMMIT
            else:
                how = self.wanted
                if how == DATA_PLANE:  # asked for: say so when it can't be
                    await _require_snapshot_operations(name, deployment)
            origin.how.set_result(how)
            if self.warm is not None:
                try:
                    await self.warm(WarmEnv(env_id, deployment))
                except Exception as exc:
                    raise StepError(f"warm({name}) raised {type(exc).__name__}: {exc}") \
                        from None
            if how == DATA_PLANE:
                snapshot = await take_snapshot(name, deployment,
                                               try_on_origin=self.wanted is None)
            else:
                snapshot = await self._commit(name, own)
            origin.snapshot.set_result(snapshot)
        except BaseException as exc:
            origin.fail(exc if isinstance(exc, Exception) else
                        StepError(f"the group's warm env for '{name}' was stopped"))
            if not isinstance(exc, Exception):
                raise
        finally:
            # kept, so close() waits for it even when it cancelled this task meanwhile
            down = asyncio.ensure_future(own.teardown.run())
            self.origin_teardowns.append(down)
            await asyncio.shield(down)
            last_resort.release(own.teardown)

    async def _commit(self, name: str, own: TaskContext) -> Snapshot:
        sandboxes = list(own.sandboxes.values())
        unable = [s.provider_name for s in sandboxes if not s.can_commit]
        if unable or not sandboxes:
            raise StepError(
                f"env '{name}' cannot be forked: its env servers do not serve data/get, "
                f"data/add and data/reset (a data-plane snapshot), and its "
                f"'{', '.join(unable) or 'no'}' sandbox cannot commit them to images; add "
                "@get_data/@add_data to the env, or deploy it on docker")
        images: list[CommittedImage] = []
        for sandbox in sandboxes:
            committed = await sandbox.commit_containers(labels=self.labels)
            self.teardown.register("image", f"committed images of {name}",
                                   _remover(sandbox, committed))
            images.extend(committed)
        last_resort.keep(self.teardown)
        return Snapshot(IMAGE_COMMIT, images=tuple(images))

    async def close(self) -> None:
        """Stop origins still warming, then remove the committed images (call it once every
        member's teardown ran: an image in use cannot go)."""
        self.closed = True
        tasks = [o.task for o in self.origins.values() if o.task is not None and not o.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*self.origin_teardowns, return_exceptions=True)
        report = await self.teardown.run()
        last_resort.release(self.teardown)
        if report.failed:
            failed = report.failed[0]
            raise RuntimeError(f"could not remove {failed.label}: {failed.error}")


def _remover(sandbox: Sandbox, images: tuple[CommittedImage, ...]) -> Callable[[], Awaitable[None]]:
    async def remove() -> None:
        await sandbox.remove_committed(images)

    return remove


async def _card(deployment: Any) -> dict[str, Any]:
    from agentenv_protocol.client import fetch_card_raw

    return await fetch_card_raw(deployment.url, headers=deployment.headers)


def _operations(card: dict[str, Any]) -> frozenset[str]:
    found = (card.get("capabilities") or {}).get("operations")
    return SNAPSHOT_OPERATIONS if found is None else frozenset(found)  # absent: an old card


async def _can_snapshot(deployment: Any) -> bool:
    """Every env server behind the gateway serves data/get, data/add and data/reset (so the
    gateway's data/get is the whole state, and data/reset plus data/add put it back)."""
    try:
        card = await _card(deployment)
    except Exception:
        return False
    children = [c for c in card.get("children_environments") or [] if isinstance(c, dict)]
    return all(SNAPSHOT_OPERATIONS <= _operations(c) for c in [card, *children])


async def _require_snapshot_operations(name: str, deployment: Any) -> None:
    if not await _can_snapshot(deployment):
        raise StepError(f"fork='data': env '{name}' cannot be snapshot over the data plane: "
                        "every env server behind its gateway must serve data/get, data/add and "
                        "data/reset (fork='commit' saves its files instead)")


async def take_snapshot(name: str, deployment: Any, *, try_on_origin: bool) -> Snapshot:
    """``data/get`` of the warmed env; with ``try_on_origin``, also put it back on the origin
    (reset, add) and check the digest, so a snapshot that does not load fails here, once."""
    from agentenv_protocol.client import DataPlaneClient
    from agentenv_protocol.errors import ProtocolError, TransportError

    try:
        async with DataPlaneClient(deployment.url, headers=deployment.headers,
                                   timeout=DATA_TIMEOUT_SECONDS) as data:
            answer = await data.call("data/get", {})
            snapshot = Snapshot(DATA_PLANE, parts=tuple(answer.get("parts") or ()),
                                digest=digest_of(answer))
            if try_on_origin:
                again = await _put_back(data, snapshot)
                if again != snapshot.digest:
                    raise StepError(
                        f"env '{name}' cannot be forked over the data plane: after data/reset "
                        "and data/add of its data/get answer, data/get answers something else; "
                        "make @add_data take back what @get_data gives, or pass "
                        "fork='commit' (its files only)")
    except (ProtocolError, TransportError) as exc:
        raise StepError(f"env '{name}': taking its snapshot over the data plane failed: "
                        f"{exc}") from None
    return snapshot


async def _put_back(data: DataPlaneClient, snapshot: Snapshot) -> str:
    """Reset, add the snapshot's parts (none: nothing to add), answer the new state's digest."""
    await data.call("data/reset", {})
    if snapshot.parts:
        await data.call("data/add", {"parts": list(snapshot.parts)})
    return digest_of(await data.call("data/get", {}))


async def load_snapshot(name: str, deployment: Any, snapshot: Snapshot) -> None:
    """Make a member's env the snapshot's state, and check it is (the digests agree)."""
    from agentenv_protocol.client import DataPlaneClient
    from agentenv_protocol.errors import ProtocolError, TransportError

    try:
        async with DataPlaneClient(deployment.url, headers=deployment.headers,
                                   timeout=DATA_TIMEOUT_SECONDS) as data:
            digest = await _put_back(data, snapshot)
    except (ProtocolError, TransportError) as exc:
        raise StepError(f"env '{name}': loading the group's snapshot failed: {exc}") from None
    if digest != snapshot.digest:
        raise StepError(f"env '{name}': after loading the group's snapshot its data/get "
                        "differs from the warmed env's; this copy is not used")

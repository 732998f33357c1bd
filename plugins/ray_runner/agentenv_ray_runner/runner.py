"""The ``ray`` runner: each task run on a node of a Ray cluster, its sandboxes on that node.

How a run travels:

1. a slot: a one-bundle placement group asking for one ``agentenv_env_slots`` (a Ray custom
   resource each node declares, ``ray start --resources='{"agentenv_env_slots": 8}'``). Ray's
   scheduler hands it out cluster-wide, so however many drivers share the cluster, a node never
   has more runs (and so envs) up than it declared;
2. the slot's node's actor: one long-lived async actor per node (pinned there with a hard node
   affinity), which owns the node's Docker client and runs the request with the core's
   ``local`` runner, so an episode's containers and its calls stay on that node. The record's
   context carries ``ray_node_id`` and ``ray_worker_pid`` (the actor's process, which the
   containers' ``agentenv.owner`` label names);
3. the result and the teardown report come back; the slot is given back.

Cancellation is cooperative: :meth:`RayRunner.cancel` asks each actor to cancel its runs, which
end ``cancelled`` and tear down. Ray's force-cancel would kill the worker with its containers
still up, so it is never used. Each actor reaps leftovers by label when it starts (containers
whose owner process is gone, as ``agent-env gc`` judges them) and when it stops (everything it
made itself). A node that dies takes its actor with it: its runs end ``error`` (an infra error,
which ``eval run`` retries on another node).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import Any, ClassVar

import attrs
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from agent_env.api import (
    OWNER_LABEL,
    LocalRunner,
    RunnerContext,
    RunRequest,
    StoredInstances,
    TaskResult,
    TeardownReport,
    UserError,
    current,
    find_leftovers,
    owner_label,
    remove_leftovers,
)
from agentenv_ray_runner.cluster import NAMESPACE, SLOT_RESOURCE, actor_env, join_cluster

#: store backends that live on one machine's disk: a multi-node cluster cannot share them
NODE_LOCAL_STORES = {"document": ("sqlite",), "object": ("filesystem",)}


async def _already_down() -> None:
    """The close of a teardown item that came back from a node: it ran there already."""


def _portable(report: TeardownReport) -> TeardownReport:
    """The report without its callables (close and the gone probe hold sandbox objects with a
    Docker client, which cannot travel back from the node)."""
    return TeardownReport(
        terminated=tuple(attrs.evolve(i, close=_already_down, gone=None)
                         for i in report.terminated),
        failed=tuple(attrs.evolve(i, close=_already_down, gone=None) for i in report.failed))


@ray.remote
class NodeActor:
    """One per node per runner: runs requests here with the local runner, reaps leftovers."""

    def __init__(self, sandbox_chain: list[str] | None) -> None:
        self.sandbox_chain = sandbox_chain
        self.node_id = ray.get_runtime_context().get_node_id()
        self.runs: dict[int, LocalRunner] = {}

    async def start(self) -> tuple[str, int]:
        """Reap what runs whose process died left on this node; returns (node id, reaped)."""
        found, _ = await find_leftovers({})
        dead = [f for f in found if f.remove]
        await remove_leftovers(dead)
        return self.node_id, len(dead)

    async def run(self, key: int, request: RunRequest,
                  cancelled: str | None = None) -> tuple[TaskResult, TeardownReport]:
        runner = LocalRunner(StoredInstances(current().document_store),
                             sandbox_chain=self.sandbox_chain)
        if cancelled is not None:
            runner.cancel(cancelled)
        self.runs[key] = runner
        metadata = {**request.metadata, "ray_node_id": self.node_id,
                    "ray_worker_pid": os.getpid()}
        try:
            result, report = await runner.run(attrs.evolve(request, metadata=metadata))
        finally:
            self.runs.pop(key, None)
        return result, _portable(report)

    def cancel(self, reason: str, key: int | None = None) -> None:
        for run_key, runner in list(self.runs.items()):
            if key is None or key == run_key:
                runner.cancel(reason)

    async def stop(self) -> int:
        """Cancel what still runs, then remove everything this actor's process made."""
        self.cancel("the runner stopping")
        while self.runs:
            await asyncio.sleep(0.05)
        found, _ = await find_leftovers({OWNER_LABEL: owner_label()})
        await remove_leftovers(found)
        return len(found)


class RayRunner:
    """Runs each request on a node of a Ray cluster (see the module docstring)."""

    name: ClassVar[str] = "ray"

    def __init__(self, context: RunnerContext, *, address: str | None = None,
                 env_slots: int = 4, namespace: str = NAMESPACE,
                 shared_disk: bool = False) -> None:
        self.context = context
        self.shared_disk = shared_disk
        self.address = address
        self.env_slots = env_slots
        self.namespace = namespace
        self.actors: dict[str, Any] = {}
        self.cancel_reason: str | None = None
        self.in_flight: dict[int, str] = {}  # run key -> node id
        self._keys = itertools.count()
        self._lock = asyncio.Lock()
        self.connect_seconds = 0.0
        self.owns_cluster = False

    @classmethod
    def from_config(cls, *, context: RunnerContext, address: str | None = None,
                    env_slots: int = 4, namespace: str = NAMESPACE,
                    shared_disk: bool = False) -> RayRunner:
        """``address``: the cluster (``HOST:PORT`` or ``ray://...``; none starts a local one
        with ``env_slots`` slots); ``namespace``: where the runner's actors are named;
        ``shared_disk``: every node sees the same state folder (one machine, or a network
        filesystem), so SQLite/filesystem stores are allowed on a multi-node cluster."""
        if env_slots < 1:
            raise UserError(f"[runner.config] env_slots must be >= 1, not {env_slots}")
        return cls(context, address=address, env_slots=env_slots, namespace=namespace,
                   shared_disk=shared_disk)

    # -- the cluster -----------------------------------------------------------------------------

    def connect(self) -> None:
        """Join the cluster (or start a local one) and refuse what it cannot share."""
        started = time.perf_counter()
        if not ray.is_initialized():
            self.owns_cluster = join_cluster(self.address, self.env_slots, self.namespace)
        self.connect_seconds = time.perf_counter() - started
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        if not self.shared_disk:
            check_shared_stores(len(nodes))
        if not any(n.get("Resources", {}).get(SLOT_RESOURCE) for n in nodes):
            raise UserError(f"no node of the Ray cluster offers the {SLOT_RESOURCE} resource: "
                            f"start each node with --resources='{{\"{SLOT_RESOURCE}\": 8}}'")

    async def _actor(self, node_id: str) -> Any:
        """The node's actor, started (and its leftovers reaped) on first use."""
        async with self._lock:
            actor = self.actors.get(node_id)
            if actor is None:
                actor = NodeActor.options(  # type: ignore[attr-defined]
                    num_cpus=0, max_concurrency=1000, runtime_env={"env_vars": actor_env()},
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote(list(self.context.sandbox_chain or []) or None)
                await actor.start.remote()
                self.actors[node_id] = actor
            return actor

    # -- the runner contract ---------------------------------------------------------------------

    async def run(self, request: RunRequest) -> tuple[TaskResult, TeardownReport]:
        if not ray.is_initialized():
            self.connect()  # in this thread: Ray wants its driver set up on the main thread
        key = next(self._keys)
        if self.cancel_reason is not None:
            return await self._never_started(key, request)
        slot = placement_group([{SLOT_RESOURCE: 1}], strategy="STRICT_PACK")
        try:
            await slot.ready()
            if self.cancel_reason is not None:
                return await self._never_started(key, request)
            node_id = ray.util.placement_group_table(slot)["bundles_to_node_id"][0]
            self.in_flight[key] = node_id
            started = time.monotonic()
            try:
                actor = await self._actor(node_id)
                return await actor.run.remote(key, request, self.cancel_reason)  # type: ignore[no-any-return]
            except ray.exceptions.RayActorError:
                self.actors.pop(node_id, None)
                return lost(request, node_id, time.monotonic() - started), TeardownReport()
        finally:
            self.in_flight.pop(key, None)
            remove_placement_group(slot)

    async def _never_started(self, key: int, request: RunRequest
                             ) -> tuple[TaskResult, TeardownReport]:
        """A run cancelled before it had a slot: recorded ``cancelled`` by any node's actor."""
        node_id = next(iter(self.actors), None) or ray.get_runtime_context().get_node_id()
        actor = await self._actor(node_id)
        return await actor.run.remote(key, request, self.cancel_reason)  # type: ignore[no-any-return]

    def cancel(self, reason: str) -> None:
        """Cooperative: every actor cancels its runs (they end ``cancelled`` and tear down)."""
        self.cancel_reason = reason
        for actor in list(self.actors.values()):
            actor.cancel.remote(reason)

    async def close(self) -> None:
        """Stop every actor (each reaps what its process made) and let them go."""
        actors, self.actors = list(self.actors.values()), {}
        for actor in actors:
            try:
                await actor.stop.remote()
            except ray.exceptions.RayActorError:
                pass  # its node is gone; `agent-env gc` on that node reaps what is left
            ray.kill(actor, no_restart=True)
        if self.owns_cluster:
            ray.shutdown()  # the local cluster this runner started ends with it
            self.owns_cluster = False


def check_shared_stores(node_count: int) -> None:
    """Refuse node-local document/object stores on a cluster of more than one node."""
    if node_count <= 1:
        return
    config = current().config
    for kind, local in NODE_LOCAL_STORES.items():
        backend = config.store(kind).backend
        if backend in local:
            raise UserError(
                f"the Ray cluster has {node_count} nodes but the {kind} store is '{backend}', "
                f"on one machine's disk: set [stores] {kind} to a shared one (s3/gcs, the "
                "aws_stores or gcp_stores plugin), or set [runner.config] shared_disk = true "
                "if every node sees this state folder")


def lost(request: RunRequest, node_id: str, seconds: float) -> TaskResult:
    """The result of a run whose node (or actor) died under it: ``error``, so evals retry it.

    Its instance record was the dead node's to write, so none exists for this id.
    """
    return TaskResult(request.spec, f"lost-on-ray-node-{node_id[:12]}-{next(_LOST)}", "error",
                      {}, [], [], seconds)


_LOST = itertools.count()

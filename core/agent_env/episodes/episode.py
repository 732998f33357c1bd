"""One episode: a task run in the background whose trainer agents are played through turns.

The run is the engine's (:func:`agent_env.tasks.engine.run_task`), with a trainer's agent played
from outside: the step that deploys it asks :meth:`EpisodeContext.outside_agent` first and gets
an :class:`~agent_env.episodes.turns.OutsideAgent`, so its prompts become turns handed out by
:meth:`Episode.next_turn`. The run is recorded like any other
(``agent-env task get-instance <episode.id>``) and torn down when it ends, whatever happens.

Waiting is safe to cancel: ``next_turn()``, ``result()`` and ``abandon()`` wait on the run without
owning it, so cancelling a caller ends only that wait. Only :meth:`Episode.abandon` (or closing
the spec) stops a run early; it is recorded ``cancelled`` with the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_env.episodes import last_resort
from agent_env.episodes.errors import EpisodeError, EpisodeFailed
from agent_env.episodes.turns import ABANDONED, OPEN, OutsideAgent, Turn
from agent_env.tasks import records, scores
from agent_env.tasks.context import TaskContext
from agent_env.tasks.teardown import Teardown, TeardownReport

if TYPE_CHECKING:
    from agent_env.agents import Agent, AgentSetup
    from agent_env.episodes.group import EpisodeGroup
    from agent_env.episodes.pool import EnvPool
    from agent_env.episodes.spec import EpisodeSpec
    from agent_env.sandbox.base import CommittedImage, Sandbox
    from agent_env.tasks.engine import TaskResult
    from agent_env.tasks.records import InstanceRecord, InstanceStore

#: Label on everything an episode spec's runs bring up (its value: the spec's id).
SPEC_LABEL = "agentenv.episodes"
STARTING, RUNNING, FINISHED = "starting", "running", "finished"


class EpisodeContext(TaskContext):
    """A run's context that knows its episode: where stand-in steps find their player."""

    episode: Episode
    #: A forked member's committed env servers (:mod:`.fork`): every sandbox its steps
    #: register that can start them does so in place of their source images.
    committed_images: list[CommittedImage] | None = None

    def add_sandbox(self, name: str, sandbox: Sandbox, passed_over: Sequence[str] = ()) -> None:
        super().add_sandbox(name, sandbox, passed_over)
        if self.committed_images and sandbox.can_commit:
            sandbox.start_from_committed(self.committed_images)

    def outside_agent(self, setup: AgentSetup) -> Agent | None:
        """A trainer's agent is played from outside, through turns: nothing is deployed."""
        if setup.name in self.episode.trainer_agents:
            return OutsideAgent(self.episode, setup)
        return None


class _WatchedRecords:
    """The spec's instance store, telling the episode when its record first exists."""

    def __init__(self, inner: InstanceStore | None, recorded: asyncio.Event) -> None:
        self.inner = inner
        self.recorded = recorded

    def save(self, record: InstanceRecord) -> None:
        if self.inner is not None:
            self.inner.save(record)
        self.recorded.set()

    def get(self, instance_id: str) -> InstanceRecord | None:
        return self.inner.get(instance_id) if self.inner is not None else None


class Episode:
    """One run of the spec's task; ``id`` is also its instance id."""

    def __init__(self, spec: EpisodeSpec, group: EpisodeGroup | None = None) -> None:
        self.spec = spec
        #: The group this episode is a member of (its envs are copies of a warmed one).
        self.group = group
        self.trainer_agents: tuple[str, ...] = spec.trainer_agents
        self.turn_timeout: float | None = spec.turn_timeout
        self.id = records.new_instance_id(spec.task.id)
        metadata: dict[str, Any] = {"episode": {
            "trainer_agents": list(spec.trainer_agents), "turn_timeout": spec.turn_timeout,
            "reuse_envs": spec.pool is not None, "spec": spec.id,
        }}
        if group is not None:
            metadata["episode"]["group"] = group.id
        self.ctx = EpisodeContext(
            task_id=spec.task.id, instance_id=self.id, artifacts=spec.task.artifacts,
            teardown=Teardown(), metadata=metadata, sandbox_chain=spec.sandbox_chain,
            labels={SPEC_LABEL: spec.id}, seed=spec.seed,
        )
        self.ctx.episode = self
        #: Every turn opened so far, in order.
        self.turns: list[Turn] = []
        #: How the run ended (None while it runs).
        self.run_result: TaskResult | None = None
        #: What teardown did (None until it ran).
        self.teardown_report: TeardownReport | None = None
        self.abandon_reason: str | None = None
        #: What became of each pooled env at teardown, by env id (``reuse_envs``): ``reset``
        #: (lent again next), ``quarantined`` (its verified reset failed), ``reset failed`` or
        #: ``torn down``.
        self.env_returns: dict[str, str] = {}
        self.state = STARTING
        self._error: BaseException | None = None
        self._changed = asyncio.Event()
        self._run: asyncio.Future[TaskResult] | None = None
        self._driver: asyncio.Future[None] | None = None
        self._abandoning: asyncio.Future[None] | None = None
        self._admission = asyncio.Lock()
        self._admitted = False

    def __repr__(self) -> str:
        return f"<Episode {self.id}: {self.state}>"

    @property
    def pool(self) -> EnvPool | None:
        return self.spec.pool

    @property
    def outcome(self) -> str | None:
        """``passed``, ``failed``, ``cancelled``... once the run ended."""
        return self.run_result.outcome if self.run_result is not None else None

    @property
    def scores_so_far(self) -> dict[str, float]:
        """``{step_id: score}`` of the verifiers that have run so far: between two turns, the
        scores a task records mid-episode (an intermediate reward), final once it finished."""
        if self.run_result is not None:
            return dict(self.run_result.scores)
        return scores.reported_scores(self.ctx.verifications)

    # -- what the turns tell the episode -------------------------------------------------------

    def open_turn(self, turn: Turn) -> None:
        self.turns.append(turn)
        self._notify()

    def turn_changed(self, turn: Turn) -> None:
        self._notify()

    def _notify(self) -> None:
        self._changed.set()

    async def _changes(self) -> None:
        """Wait for the next change (a turn, the run's end); cancelling it cancels only it."""
        self._changed.clear()
        await self._changed.wait()

    async def admit_envs(self) -> None:
        """Wait for room under the spec's ``max_envs`` (once per episode; given back at its
        teardown, after its envs went down or back to the pool)."""
        slots = self.spec.env_slots
        if slots is None:
            return
        async with self._admission:
            if self._admitted:
                return
            await slots.acquire()
            self._admitted = True

            async def give_room_back() -> None:
                slots.release()

            self.ctx.on_teardown("room", "room for this episode's envs", give_room_back)

    # -- running --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the run; returns once its record exists (nothing is deployed yet)."""
        recorded = asyncio.Event()
        last_resort.keep(self.ctx.teardown)
        from agent_env.runtime import use

        with use(self.spec.runtime):  # the run's task keeps the spec's runtime as current
            self._driver = asyncio.ensure_future(self._drive(_WatchedRecords(
                self.spec.instances, recorded)))
        waiter = asyncio.ensure_future(recorded.wait())
        try:
            await asyncio.wait({waiter, self._driver}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self._abandoning = asyncio.ensure_future(self.abandon("start() was cancelled"))
            raise
        finally:
            waiter.cancel()
        if not recorded.is_set():
            self._raise_run_error()
        if self.state == STARTING:  # a run that failed at once may be over already
            self.state = RUNNING

    async def _drive(self, instances: _WatchedRecords) -> None:
        from agent_env.tasks.engine import run_task

        self._run = asyncio.ensure_future(run_task(
            self.spec.task.spec, self.ctx, registry=self.spec.registry, instances=instances))
        if self.abandon_reason is not None:  # abandoned before the run began
            self._run.cancel()
        try:
            await asyncio.wait({self._run})
            try:
                self.run_result = self._run.result()
            except asyncio.CancelledError:  # cancelled before the engine started recording
                self.run_result = self._never_started(instances)
            except Exception as exc:  # the engine itself raised (a defect, or a bad step)
                self._error = exc
        finally:
            for turn in self.turns:
                turn.close(ABANDONED)
            self._notify()
            try:
                self.teardown_report = await self.ctx.teardown.run()
            except asyncio.CancelledError:  # the event loop is going away: last resort
                self.teardown_report = self.ctx.teardown.report()
            last_resort.release(self.ctx.teardown)
            self.state = FINISHED
            self.spec.forget(self)
            if self.group is not None:
                self.group.member_finished()
            self._notify()

    def _never_started(self, instances: _WatchedRecords) -> TaskResult:
        from agent_env.tasks.engine import TaskResult

        now = records.utc_now()
        reason = self.abandon_reason or "cancelled before it started"
        instances.save(records.InstanceRecord(
            self.id, self.spec.task.id, self.spec.task.version, records.CANCELLED, now, now,
            scores.CANCELLED, cancel_reason=reason, duration_seconds=0.0,
            context=self.ctx.snapshot()))
        return TaskResult(self.spec.task.spec, self.id, scores.CANCELLED, {}, [], [], 0.0,
                          cancel_reason=reason)

    def _run_done(self) -> bool:
        return self._run is not None and self._run.done()

    def _raise_run_error(self) -> None:
        """Raise what ended the run, if it ended without scores to report."""
        if self._error is not None:
            raise self._error
        result = self.run_result
        if result is None:
            return
        if self.abandon_reason is not None or result.outcome == scores.CANCELLED:
            raise EpisodeError(f"episode abandoned: {self.abandon_reason or result.cancel_reason}")
        fatal = [f for f in result.failures if f.is_fatal]
        if fatal:
            raise EpisodeFailed(f"episode {self.id} failed at step '{fatal[0].step_id}' "
                                f"({fatal[0].step_type}): {fatal[0].summary}", result)

    # -- the trainer's side ---------------------------------------------------------------------

    async def next_turn(self) -> Turn | None:
        """The next open turn of a trainer's agent, or None once the run finished.

        Raises what ended the run (:class:`EpisodeFailed` for a failed step) and, after
        :meth:`abandon`, ``EpisodeError("episode abandoned: <reason>")``.
        """
        while True:
            if self.abandon_reason is not None:
                raise EpisodeError(f"episode abandoned: {self.abandon_reason}")
            for turn in self.turns:
                if turn.state == OPEN and not turn.handed_out:
                    turn.handed_out = True
                    return turn
            if self._run_done() or self.state == FINISHED:
                self._raise_run_error()
                return None
            await self._changes()

    def open_turns(self) -> list[Turn]:
        return [turn for turn in self.turns if turn.is_open]

    async def result(self) -> dict[str, float]:
        """``{step_id: score}`` once the run and its teardown are over (as ``agent-env run``
        reports them). Raises while a turn is open: the run can't finish without it."""
        while True:
            open_turns = self.open_turns()
            if open_turns:
                turn = open_turns[0]
                raise EpisodeError(f"turn '{turn.step_id}' of agent '{turn.agent}' isn't ended, "
                                   "so the run can't finish")
            if self.state == FINISHED:
                self._raise_run_error()
                assert self.run_result is not None
                return dict(self.run_result.scores)
            await self._changes()

    async def abandon(self, reason: str = "abandoned") -> None:
        """Stop the run (recorded ``cancelled`` with ``reason``) and wait for its teardown.

        After the run ended it changes nothing. Cancelling the caller stops only the wait.
        """
        if self.abandon_reason is None and self.state != FINISHED and not self._run_done():
            self.abandon_reason = str(reason)
            self.ctx.cancel_reason = self.abandon_reason
            for turn in self.turns:
                turn.close(ABANDONED)
            if self._run is not None:
                self._run.cancel()
            self._notify()
        if self._driver is not None:
            await asyncio.wait({self._driver})

    def describe(self) -> Mapping[str, Any]:
        return {"id": self.id, "state": self.state, "outcome": self.outcome,
                "turns": [(t.step_id, t.agent, t.state) for t in self.turns],
                "abandon_reason": self.abandon_reason}

"""``EpisodeSpec``: a task prepared for outside players, from which episodes start side by side.

``from_task`` checks once what every episode would otherwise fail on (see :mod:`.rules`) and
builds the step registry the episodes run with: the engine's, with ``deploy_agent`` stood in for
(and ``deploy_env`` going through the env pool when ``reuse_envs``). ``start()`` makes one episode
per call; they share nothing but the pool. ``start_group(n, warm=...)`` makes n at once whose
envs are copies of one warmed env (:mod:`.fork`, :mod:`.group`).
"""

from __future__ import annotations

import asyncio
import secrets
import string
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agent_env.episodes.episode import SPEC_LABEL, Episode
from agent_env.episodes.errors import EpisodeError
from agent_env.episodes.fork import FORK_CHOICES, WarmEnv
from agent_env.episodes.group import EpisodeGroup
from agent_env.episodes.pool import EnvPool, episode_env_step_type
from agent_env.episodes.rules import EpisodePlan, Prompt, check_arguments, plan_episode
from agent_env.episodes.task_source import Task

if TYPE_CHECKING:
    from agent_env.runtime import Runtime
    from agent_env.tasks.records import InstanceStore
    from agent_env.tasks.steps import Step

_ALPHABET = string.ascii_lowercase + string.digits


def _short_id(prefix: str) -> str:
    return f"{prefix}-{''.join(secrets.choice(_ALPHABET) for _ in range(8))}"


def envs_per_episode(task: Task) -> int:
    """How many envs one episode deploys (its ``deploy_env`` steps)."""
    return sum(1 for raw in task.steps if raw.get("type") == "deploy_env")


class EpisodeSpec:
    """How to play a task from outside: which agents, with what deadline, reusing envs or not."""

    def __init__(
        self,
        task: Task,
        plan: EpisodePlan,
        registry: Mapping[str, type[Step]],
        *,
        seed: Mapping[str, Any] | None = None,
        turn_timeout: float | None = None,
        reuse_envs: bool = False,
        max_envs: int | None = None,
        instances: InstanceStore | None = None,
        sandbox_chain: Sequence[str] | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        from agent_env.runtime import current

        self.id = _short_id("episodes")
        #: The config, plugins and stores every episode of this spec runs under.
        self.runtime = runtime or current()
        self.task = task
        self.plan = plan
        self.registry = dict(registry)
        self.seed = dict(seed) if seed else None
        self.turn_timeout = float(turn_timeout) if turn_timeout is not None else None
        self.instances = instances
        self.sandbox_chain = list(sandbox_chain) if sandbox_chain else None
        self.labels = {SPEC_LABEL: self.id}
        self.pool = EnvPool(f"{self.id}-pool", self.labels) if reuse_envs else None
        self.max_envs = max_envs
        #: Room for episodes' envs under ``max_envs`` (one slot holds one episode's envs).
        self.env_slots: asyncio.Semaphore | None = None
        if max_envs is not None:
            per_episode = max(1, envs_per_episode(task))
            self.env_slots = asyncio.Semaphore(max(1, max_envs // per_episode))
        self.closed = False
        self._live: dict[str, Episode] = {}
        self._groups: list[EpisodeGroup] = []

    @classmethod
    def from_task(
        cls,
        task: Task,
        *,
        trainer_agents: Iterable[str] | str | None = None,
        seed: Mapping[str, Any] | None = None,
        turn_timeout: float | None = None,
        reuse_envs: bool = False,
        max_envs: int | None = None,
        sandbox: str | Sequence[str] | None = None,
        instances: InstanceStore | None = None,
        runtime: Runtime | None = None,
    ) -> EpisodeSpec:
        """Check ``task`` for outside play and prepare its episodes.

        ``trainer_agents`` defaults to the task's only prompted agent; ``turn_timeout`` replaces
        every outside prompt's ``timeout_seconds``; ``reuse_envs`` resets and reuses envs
        between episodes; ``max_envs`` bounds the envs up at once (further episodes wait at
        their ``deploy_env`` for an earlier one to give its envs back: a small machine runs out
        of Docker networks before it runs out of episodes); ``sandbox`` is a provider chain for
        every sandbox (like ``--sandbox``);
        ``instances`` is where run records go (default: the configured document store);
        ``runtime`` is the :class:`~agent_env.runtime.Runtime` (config, plugins, stores) the
        episodes run under (default: the current one), so two specs with different configs can
        train side by side in one process.
        """
        if not isinstance(task, Task):
            raise EpisodeError("from_task takes a Task (Task.get(id), Task.from_bundle(path, "
                               f"name) or Task.from_steps(...)), not {type(task).__name__}")
        check_arguments(seed, turn_timeout)
        if max_envs is not None and (isinstance(max_envs, bool) or not isinstance(max_envs, int)
                                     or max_envs < 1):
            raise EpisodeError(f"max_envs must be a positive whole number, not {max_envs!r}")
        from agent_env.runtime import current, use

        runtime = runtime or current()
        with use(runtime):
            return cls._prepare(task, trainer_agents, seed, turn_timeout, reuse_envs, max_envs,
                                sandbox, instances, runtime)

    @classmethod
    def _prepare(cls, task: Task, trainer_agents: Iterable[str] | str | None,
                 seed: Mapping[str, Any] | None, turn_timeout: float | None, reuse_envs: bool,
                 max_envs: int | None, sandbox: str | Sequence[str] | None,
                 instances: InstanceStore | None, runtime: Runtime) -> EpisodeSpec:
        from agent_env.tasks.engine import build_steps

        registry: dict[str, type[Step]] = dict(runtime.host.registry("step_type"))
        if "deploy_env" in registry:
            # classes hash by identity; attrs' __hash__ = None on instances misleads mypy
            registry["deploy_env"] = episode_env_step_type(
                registry["deploy_env"])  # type: ignore[arg-type]
        steps = build_steps(task.spec, registry, dict(seed or {}))
        plan = plan_episode(task.name, steps, trainer_agents, turn_timeout)
        needed = envs_per_episode(task)
        if max_envs is not None and needed > max_envs:
            raise EpisodeError(f"max_envs={max_envs} is less than the {needed} envs one episode "
                               f"of task '{task.name}' deploys")
        if instances is None:
            from agent_env.runtime import current
            from agent_env.tasks.records import StoredInstances

            instances = StoredInstances(current().document_store)
        chain = [sandbox] if isinstance(sandbox, str) else sandbox
        from agent_env.sandbox.chain import split_chain

        chain = [p for item in chain or () for p in split_chain(item)]
        return cls(task, plan, registry, seed=seed, turn_timeout=turn_timeout,
                   reuse_envs=reuse_envs, max_envs=max_envs, instances=instances,
                   sandbox_chain=chain, runtime=runtime)

    def __repr__(self) -> str:
        return (f"<EpisodeSpec {self.id} of {self.task.id}: plays "
                f"{list(self.trainer_agents)}, {len(self._live)} running>")

    @property
    def trainer_agents(self) -> tuple[str, ...]:
        """The agents the caller plays."""
        return self.plan.trainer_agents

    @property
    def prompts(self) -> tuple[Prompt, ...]:
        """The prompts the trainer's agents get, in task order (one turn each, per episode)."""
        return self.plan.prompts

    @property
    def episodes(self) -> list[Episode]:
        """The episodes still running."""
        return list(self._live.values())

    async def start(self) -> Episode:
        """Start a new episode; returns once its run is recorded, before anything deploys."""
        if self.closed:
            raise EpisodeError("this EpisodeSpec is closed; make a new one to start episodes")
        episode = Episode(self)
        self._live[episode.id] = episode
        await episode.start()
        return episode

    async def start_group(
        self, n: int, *, warm: Callable[[WarmEnv], Awaitable[Any]] | None = None,
        fork: str = "auto",
    ) -> EpisodeGroup:
        """Start ``n`` episodes whose envs are copies of one env warmed by ``warm``.

        For each ``deploy_env`` of the task one env is deployed and ``await warm(env)`` brings
        it to the state every member starts from (``env``: a :class:`WarmEnv`, with ``mcp()``
        and ``data()``); its state is taken once and each member gets a copy of its own.
        ``fork`` says how: ``"data"`` (the env's ``data/get`` answer, loaded into each member's
        env with ``data/reset`` and ``data/add``, checked by digest), ``"commit"`` (the env
        servers' files saved as images each member starts from: docker) or ``"auto"`` (data
        when every env server serves data/get, data/add and data/reset, else commit). Returns
        once every member is recorded; ``await group.results()`` gives their scores.
        """
        if self.closed:
            raise EpisodeError("this EpisodeSpec is closed; make a new one to start episodes")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise EpisodeError(f"start_group takes a positive whole number of episodes, not "
                               f"{n!r}")
        if fork not in FORK_CHOICES:
            raise EpisodeError(f"fork must be one of {', '.join(map(repr, FORK_CHOICES))}, "
                               f"not {fork!r}")
        if warm is not None and not callable(warm):
            raise EpisodeError(f"warm must be an async function taking the env, not "
                               f"{type(warm).__name__}")
        group = EpisodeGroup(self, _short_id("group"), warm, fork)
        self._groups.append(group)
        for _ in range(n):
            episode = Episode(self, group)
            group.episodes.append(episode)
            self._live[episode.id] = episode
        started = await asyncio.gather(*(e.start() for e in group.episodes),
                                       return_exceptions=True)
        failed = [s for s in started if isinstance(s, BaseException)]
        if failed:
            await group.close()
            raise failed[0]
        return group

    def forget(self, episode: Episode) -> None:
        """An episode finished (its teardown ran)."""
        self._live.pop(episode.id, None)

    async def close(self) -> None:
        """Abandon the episodes still running, then tear the env pool down."""
        self.closed = True
        running = list(self._live.values())
        await asyncio.gather(*(e.abandon("the episode spec was closed") for e in running),
                             return_exceptions=True)
        await asyncio.gather(*(g.close() for g in self._groups), return_exceptions=True)
        if self.pool is not None:
            from agent_env.runtime import use

            with use(self.runtime):
                await self.pool.close()

    async def __aenter__(self) -> EpisodeSpec:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

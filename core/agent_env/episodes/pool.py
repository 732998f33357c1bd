"""Env reuse: a finished episode's env is reset and handed to the next episode of the spec.

Deploying an env (sandbox, containers, readiness) takes a second or more; resetting one over
``data/reset`` takes milliseconds. With ``EpisodeSpec.from_task(..., reuse_envs=True)`` the spec's
``deploy_env`` steps go through an :class:`EnvPool`:

* a step takes an idle env deployed with the same settings, or deploys one as the pool's own
  (labelled with the pool's id, so its teardown is the pool's, not the episode's);
* when the episode's teardown runs, the env goes back: the gateway's ``data/reset`` (which every
  env server behind it that serves ``data/reset`` gets), its tool-access rules cleared, its
  clock disarmed and its trajectory emptied; only then is it idle again. An env whose card
  does not offer ``data/reset``, whose reset fails, or that nears its expiry is torn down
  instead, so no episode ever sees another's state;
* the reset is **verified** where the env says what its state is (its card offers ``data/get``):
  a digest of ``data/get`` is taken when the env is fresh, and again after each reset; an env
  whose reset did not bring the digest back is quarantined (torn down, counted in
  ``quarantined``, logged) instead of being lent to the next episode. An env whose ``data/get``
  is not deterministic is then simply never reused, which costs deploys, never correctness;
* the pool is torn down by ``spec.close()`` (``async with spec``), else at interpreter exit.

The gateway's trajectory is cleared with the reset (``POST /trajectory/clear``), so the next
episode's trajectory holds only its own calls.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
from typing import TYPE_CHECKING, Any

import attrs

from agent_env.episodes import last_resort
from agent_env.tasks.context import TaskContext
from agent_env.tasks.steps import COMMON_KEYS, Step, StepError
from agent_env.tasks.teardown import Teardown

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

#: An idle env this close to its expiry is torn down rather than lent again.
EXPIRY_MARGIN_SECONDS = 600
RESET_TIMEOUT_SECONDS = 30.0
#: What became of an env an episode gave back (``Episode.env_returns``).
RESET, QUARANTINED, RESET_FAILED, TORN_DOWN = "reset", "quarantined", "reset failed", "torn down"


@attrs.define(eq=False)
class PooledEnv:
    """One env the pool deployed: what a step needs to use it, and how to take it down."""

    key: str
    env_id: str
    teardown: Teardown
    deployment: Any = None
    sandbox_name: str | None = None
    sandbox: Any = None
    outputs: dict[str, Any] = attrs.field(factory=dict)
    uses: int = 0
    #: digest of ``data/get`` when fresh (None: the env does not say what its state is)
    fresh_state: str | None = None


def pool_key(step: Step, ctx: TaskContext) -> str:
    """Envs are interchangeable when deployed by the same settings on the same providers."""
    settings = {k: v for k, v in attrs.asdict(step).items() if k not in COMMON_KEYS}
    return json.dumps({"type": step.type, "settings": settings,
                       "providers": ctx.sandbox_chain}, sort_keys=True, default=str)


class EnvPool:
    """Idle envs by deploy settings; see the module docstring."""

    def __init__(self, pool_id: str, labels: dict[str, str]) -> None:
        self.id = pool_id
        self.labels = dict(labels)
        self.closed = False
        self.idle: dict[str, list[PooledEnv]] = {}
        self.entries: set[PooledEnv] = set()
        #: key -> the data-plane operations those envs serve (learnt on the first deploy)
        self.operations: dict[str, frozenset[str]] = {}
        self.deploys = 0
        self.reuses = 0
        #: envs torn down because their reset did not restore their fresh state
        self.quarantined = 0

    def resettable(self, key: str) -> bool:
        return "data/reset" in self.operations.get(key, ())

    def idle_count(self) -> int:
        return sum(len(v) for v in self.idle.values())

    async def lend(self, step: Step, ctx: TaskContext,
                   deploy: Callable[[Step, TaskContext], Awaitable[None]]) -> None:
        """Give ``ctx`` an env for ``step``: an idle one, else one deployed now by ``deploy``."""
        env_id = step.env_id  # type: ignore[attr-defined]
        if env_id in ctx.envs:
            raise StepError(f"env '{env_id}' is already deployed in this task")
        key = pool_key(step, ctx)
        entry = self._take(key)
        if entry is None:
            entry = await self._deploy(key, env_id, step, ctx, deploy)
        else:
            self.reuses += 1
        entry.uses += 1
        deployment = entry.deployment
        ctx.register_secret(getattr(deployment, "token", None))
        ctx.envs[env_id] = deployment
        if entry.sandbox_name:
            ctx.sandboxes[entry.sandbox_name] = entry.sandbox  # the pool's: no teardown here
        ctx.outputs[step.id] = {**entry.outputs, "reused": entry.uses > 1}
        returns = getattr(getattr(ctx, "episode", None), "env_returns", None)
        ctx.on_teardown("env", f"env {env_id} (back to the pool)",
                        functools.partial(self.give_back, entry, returns))

    def _take(self, key: str) -> PooledEnv | None:
        idle = self.idle.get(key) or []
        return idle.pop() if idle else None

    async def _deploy(self, key: str, env_id: str, step: Step, ctx: TaskContext,
                      deploy: Callable[[Step, TaskContext], Awaitable[None]]) -> PooledEnv:
        if self.closed:
            raise StepError("the episode spec's env pool is closed")
        teardown = Teardown()
        own = TaskContext(task_id=ctx.task_id, instance_id=self.id, artifacts=ctx.artifacts,
                          teardown=teardown, sandbox_chain=ctx.sandbox_chain,
                          labels=self.labels)
        entry = PooledEnv(key, env_id, teardown)
        self.entries.add(entry)  # from here on, close() finds whatever is half made
        last_resort.keep(teardown)
        try:
            await deploy(step, own)
        except BaseException:
            await asyncio.shield(self._retire(entry, raise_on_failure=False))
            raise
        self.deploys += 1
        entry.deployment = own.envs[env_id]
        if own.sandboxes:
            entry.sandbox_name, entry.sandbox = next(iter(own.sandboxes.items()))
        output = own.outputs.get(step.id)
        entry.outputs = dict(output) if isinstance(output, dict) else {}
        if key not in self.operations:
            self.operations[key] = await served_operations(entry.deployment)
        if "data/get" in self.operations[key] and self.resettable(key):
            entry.fresh_state = await state_digest(entry.deployment)
        return entry

    async def give_back(self, entry: PooledEnv, returns: dict[str, str] | None = None) -> None:
        """An episode is done with ``entry``: reset it for the next one, or tear it down.

        ``returns`` (the episode's ``env_returns``) gets what became of it, by env id: ``reset``,
        ``quarantined``, ``reset failed`` or ``torn down``, so whoever plays the episode can tell
        its trainer why the next one runs on a fresh env."""
        outcome = returns if returns is not None else {}
        if self.closed or not self.resettable(entry.key) or _expiring(entry.deployment):
            outcome[entry.env_id] = TORN_DOWN
            await self._retire(entry)
            return
        from agent_env.logs import get_logger

        try:
            await reset_env(entry.deployment)
            state = (await state_digest(entry.deployment)
                     if entry.fresh_state is not None else None)
        except Exception as exc:
            get_logger("episodes").warning("reset failed; tearing the env down",
                                           env=entry.env_id, error=str(exc))
            outcome[entry.env_id] = RESET_FAILED
            await self._retire(entry)
            return
        if state != entry.fresh_state:
            self.quarantined += 1
            outcome[entry.env_id] = QUARANTINED
            get_logger("episodes").warning(
                "reset did not restore the env's fresh state; quarantined (torn down, not "
                "lent again)", env=entry.env_id, fresh=entry.fresh_state, after_reset=state)
            await self._retire(entry)
            return
        if self.closed:  # closed while resetting
            outcome[entry.env_id] = TORN_DOWN
            await self._retire(entry)
            return
        outcome[entry.env_id] = RESET
        self.idle.setdefault(entry.key, []).append(entry)

    async def _retire(self, entry: PooledEnv, *, raise_on_failure: bool = True) -> None:
        for idle in self.idle.values():
            if entry in idle:
                idle.remove(entry)
        report = await entry.teardown.run()
        last_resort.release(entry.teardown)
        if not report.failed:
            self.entries.discard(entry)
        elif raise_on_failure:
            failed = report.failed[0]
            raise RuntimeError(f"could not tear down {failed.label}: {failed.error}")

    async def close(self) -> None:
        """Tear down every env of the pool (idle or not); later give-backs tear down too."""
        self.closed = True
        entries = list(self.entries)
        self.idle.clear()
        await asyncio.gather(*(self._retire(e, raise_on_failure=False) for e in entries))


def _expiring(deployment: Any) -> bool:
    expires = getattr(deployment, "expires_at", None)
    if not expires:
        return False
    try:
        when = dt.datetime.fromisoformat(str(expires))
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    left = (when - dt.datetime.now(dt.UTC)).total_seconds()
    return left < EXPIRY_MARGIN_SECONDS


async def served_operations(deployment: Any) -> frozenset[str]:
    """The data-plane operations the env's gateway offers (its card says so); none if the card
    cannot be read."""
    from agentenv_protocol.client import fetch_card_raw

    try:
        card = await fetch_card_raw(deployment.url, headers=deployment.headers)
    except Exception:
        return frozenset()
    return frozenset((card.get("capabilities") or {}).get("operations") or [])


async def state_digest(deployment: Any) -> str:
    """sha256 of the env's ``data/get`` answer (canonical JSON): what its state is, as it says."""
    import hashlib

    import aiohttp

    from agentenv_protocol.client import DataPlaneClient

    timeout = aiohttp.ClientTimeout(total=RESET_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(headers=deployment.headers, timeout=timeout) as http:
        result = await DataPlaneClient(deployment.url, session=http).call("data/get", {})
    return hashlib.sha256(json.dumps(result, sort_keys=True, default=str).encode()).hexdigest()


async def reset_env(deployment: Any) -> None:
    """``data/reset`` through the gateway, then clear its tool-access rules, its clock and its
    trajectory."""
    import aiohttp

    from agentenv_protocol.client import DataPlaneClient

    timeout = aiohttp.ClientTimeout(total=RESET_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(headers=deployment.headers, timeout=timeout) as http:
        await DataPlaneClient(deployment.url, session=http).reset()
        for path, body in (("/tools/enable", {"role": "*", "tools": "*"}),
                           ("/clock/clear", {}), ("/trajectory/clear", {})):
            async with http.post(f"{deployment.url}{path}", json=body) as resp:
                if resp.status >= 300:
                    text = (await resp.text())[:200]
                    raise RuntimeError(f"{path} answered HTTP {resp.status}: {text}")


@functools.cache
def episode_env_step_type(base: type[Step]) -> type[Step]:
    """``base`` (the registered ``deploy_env``) as episodes run it: first room under the spec's
    ``max_envs``, then an env from the pool (``reuse_envs``) or a deploy of its own."""

    @attrs.define(kw_only=True)
    class EpisodeDeployEnv(base):  # type: ignore[valid-type,misc]
        async def run(self, ctx: TaskContext) -> None:
            episode = getattr(ctx, "episode", None)
            if episode is None:
                await base.run(self, ctx)
                return
            await episode.admit_envs()
            if episode.group is not None:  # a copy of the group's warmed env (see .fork)
                await episode.group.forks.deploy_member(self, ctx, base.run, episode.pool)
            elif episode.pool is None:
                await base.run(self, ctx)
            else:
                await episode.pool.lend(self, ctx, base.run)

    EpisodeDeployEnv.__name__ = EpisodeDeployEnv.__qualname__ = f"Episode{base.__name__}"
    return EpisodeDeployEnv

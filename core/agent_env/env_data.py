"""Seeding a deployed env's servers from ``environment`` and ``environment_universe`` artifacts.

Why one module: ``load_artifact`` into an env and the ``env ... load-environment-*`` commands
do the same thing, and the env type only knows how to seed one of its servers
(:meth:`EnvDeployment.load_environment`); which servers, in what order, how many at once, what
is said while it runs and what an interrupted load leaves for the next try is decided here.

* Routing is by ``environment_name``: each environment of the artifact goes to the server of
  that name. An ``environment`` artifact naming no server of the env is an error; a universe
  loads the environments the env serves and says which it skips (a universe may describe a
  bigger world than one env), and is an error only when it seeds none of them.
* A universe loads at most :data:`LOAD_CONCURRENCY` servers at once, each with a progress line
  (``[2/3] loading notes ...``, ``[2/3] notes loaded in 0.4s``).
* Resumable: each server loaded is recorded (collection ``env_loads``) until the whole load
  succeeds, when the records are dropped. A load of the same universe version into the same
  deployment after one that failed part-way loads only what is missing, and says so; a load
  after one that finished loads everything again (loading is how an env is put back).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import attrs

from agent_env.stores.records import Records
from agent_env.tasks.artifacts import ENVIRONMENT, ENVIRONMENT_UNIVERSE, ArtifactContent

#: How many servers of one env a universe seeds at once: each load is an env server reading a
#: file, and on a small machine more side by side only makes each slower.
LOAD_CONCURRENCY = 4
COLLECTION = "env_loads"
ENVIRONMENT_TYPES = (ENVIRONMENT, ENVIRONMENT_UNIVERSE)


class EnvDataError(ValueError):
    """Why a load could not happen or did not finish (one line, naming servers and names)."""


@attrs.frozen
class LoadedEnvironment:
    """One server of a deployment seeded from one artifact version, in a load not yet done."""

    instance_id: str
    artifact_id: str
    artifact_version: int
    environment_name: str
    loaded_at: float

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class LoadedEnvironments(Records[LoadedEnvironment]):
    """The servers an unfinished load has seeded (see the module)."""

    collection = COLLECTION

    @staticmethod
    def key(record: LoadedEnvironment) -> str:
        return (f"{record.instance_id}|{record.artifact_id}@{record.artifact_version}|"
                f"{record.environment_name}")

    @staticmethod
    def load(document: dict[str, Any]) -> LoadedEnvironment:
        fields = {f.name for f in attrs.fields(LoadedEnvironment)}
        return LoadedEnvironment(**{k: v for k, v in document.items() if k in fields})

    def of(self, instance_id: str, artifact: ArtifactContent) -> list[LoadedEnvironment]:
        return self.all({"instance_id": instance_id, "artifact_id": artifact.id,
                         "artifact_version": artifact.version})


def served_names(deployment: Any) -> list[str]:
    """The environment names ``deployment`` seeds; EnvDataError when its type seeds none."""
    names = getattr(deployment, "environment_names", None)
    if names is None or getattr(deployment, "load_environment", None) is None:
        raise EnvDataError(f"env '{deployment.env_id}' cannot take environment data (its env "
                           "type has no server to seed)")
    return list(names())


async def seed_environments(deployment: Any, artifact: ArtifactContent, *,
                            progress: Callable[[str], None],
                            loads: LoadedEnvironments | None = None,
                            concurrency: int = LOAD_CONCURRENCY) -> list[str]:
    """Seed ``deployment``'s servers from ``artifact`` (see the module); returns the names
    loaded now. EnvDataError names what failed and what was loaded."""
    if artifact.type not in ENVIRONMENT_TYPES:
        raise EnvDataError(f"artifact {artifact.id} is of type '{artifact.type}'; only "
                           f"{' and '.join(ENVIRONMENT_TYPES)} artifacts seed an env's servers")
    data = artifact.environments()
    served = served_names(deployment)
    label = f"{artifact.id} v{artifact.version}"
    wanted = [name for name in data if name in served]
    skipped = [name for name in data if name not in served]
    if not wanted or (artifact.type == ENVIRONMENT and skipped):
        raise EnvDataError(f"{label} seeds {_names(data)}, and env '{deployment.env_id}' "
                           f"serves {_names(served)}: no server of that name")
    if skipped:
        progress(f"{label}: skipping {_names(skipped)} (env '{deployment.env_id}' has no server "
                 "of that name)")
    instance_id = str(deployment.instance_id)
    resume = artifact.type == ENVIRONMENT_UNIVERSE and loads is not None
    done = ({r.environment_name for r in loads.of(instance_id, artifact)}
            if resume and loads is not None else set())
    if done & set(wanted):
        progress(f"{label}: resuming an unfinished load: {_names(sorted(done & set(wanted)))} "
                 "already loaded")
    todo = [name for name in wanted if name not in done]
    gate = asyncio.Semaphore(max(1, concurrency))
    total = len(todo)

    async def one(index: int, name: str) -> str:
        async with gate:
            progress(f"[{index}/{total}] loading {name} ...")
            started = time.monotonic()
            await deployment.load_environment(name, data[name])
            if resume and loads is not None:
                loads.add(LoadedEnvironment(instance_id, artifact.id, artifact.version, name,
                                            time.time()))
            progress(f"[{index}/{total}] {name} loaded in {time.monotonic() - started:.1f}s")
            return name

    outcomes = await asyncio.gather(*(one(i, name) for i, name in enumerate(todo, 1)),
                                    return_exceptions=True)
    failed = [(name, outcome) for name, outcome in zip(todo, outcomes, strict=True)
              if isinstance(outcome, BaseException)]
    for _, outcome in failed:
        if not isinstance(outcome, Exception):  # a cancellation or Ctrl-C goes up as itself
            raise outcome
    loaded = [name for name, outcome in zip(todo, outcomes, strict=True)
              if not isinstance(outcome, BaseException)]
    if failed:
        why = "; ".join(f"{name}: {outcome}" for name, outcome in failed)
        kept = (f"; loaded {_names(sorted(set(loaded) | done))}, which a rerun of this load "
                "skips" if resume and (loaded or done) else "")
        raise EnvDataError(f"{label}: loading {_names([n for n, _ in failed])} failed ({why})"
                           f"{kept}")
    if resume and loads is not None:
        for record in loads.of(instance_id, artifact):
            loads.remove(loads.key(record))
    return loaded


def _names(names: Any) -> str:
    return ", ".join(repr(n) for n in names) or "nothing"

"""A task ready to run as episodes: its steps (entity ids resolved) and where its files come from.

Three ways to get one: a stored task by id (:meth:`Task.get`, what ``agent-env task create``
and ``agent-env run`` store), a bundle's task (:meth:`Task.from_bundle`, which stores the bundle's
entities first, as ``agent-env run`` does), or steps built in code (:meth:`Task.from_steps`).
Each is preflighted the way ``agent-env run`` preflights, every problem reported at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_env._tuples import dict_tuple
from agent_env.tasks.artifacts import ArtifactSource, MemoryArtifacts
from agent_env.tasks.plan import TaskSpec


@attrs.frozen
class Task:
    """One version of a task: what ``EpisodeSpec.from_task`` plays."""

    id: str
    #: Short name for messages (``task 'x' prompts no agent``).
    name: str
    #: The steps as stored, entity names rewritten to ids.
    steps: tuple[dict[str, Any], ...] = attrs.field(converter=dict_tuple, repr=False)
    version: int | None = None
    label: str = ""
    artifacts: ArtifactSource = attrs.field(factory=MemoryArtifacts, eq=False, repr=False)

    @property
    def spec(self) -> TaskSpec:
        """What the engine runs."""
        return TaskSpec(self.id, self.label or self.name, self.steps, self.version)

    @classmethod
    def get(cls, task_id: str, version: int | None = None) -> Task:
        """A stored task (the latest version unless ``version``); preflighted."""
        from agent_env.bundles.entities import StoredArtifacts, stored_task
        from agent_env.runtime import current

        versioned = current().versioned_store
        record = stored_task(versioned, task_id, version)
        label = f"{record.id} v{record.version}"
        steps = _preflight(label, record.body.get("steps") or [], stored=True)
        name = str(record.body.get("name") or task_id.rsplit("/", 1)[-1])
        return cls(record.id, name, steps, record.version, label,
                   StoredArtifacts(versioned, current().object_store))

    @classmethod
    def from_bundle(cls, bundle: str | Path, task_name: str) -> Task:
        """A bundle's task (a folder, or an installed bundle's name), stored like a run does."""
        return _stored_from_bundle(bundle, [task_name]).tasks[0]

    @classmethod
    def all_from_bundle(cls, bundle: str | Path) -> BundleTasks:
        """Every task of a bundle, stored in one write as ``agent-env run BUNDLE`` stores them,
        with the bundle's evals by name: what a server of many tasks (OpenEnv, verifiers)
        offers as splits."""
        return _stored_from_bundle(bundle, None)

    @classmethod
    def from_steps(
        cls, task_id: str, steps: Sequence[Mapping[str, Any]], *,
        artifacts: ArtifactSource | None = None, name: str | None = None,
    ) -> Task:
        """A task built in code (not stored); its steps name entities by id."""
        checked = _preflight(task_id, [dict(s) for s in steps], stored=True)
        return cls(task_id, name or task_id.rsplit("/", 1)[-1], checked, None, task_id,
                   artifacts if artifacts is not None else MemoryArtifacts())


@attrs.frozen
class BundleTasks:
    """A bundle's tasks, stored, and its evals as the task names each one runs."""

    #: The bundle's folder name.
    name: str
    tasks: tuple[Task, ...]
    #: eval name -> the names of its tasks, in the eval's order.
    evals: Mapping[str, tuple[str, ...]]


def _stored_from_bundle(bundle: str | Path, task_names: Sequence[str] | None) -> BundleTasks:
    """Plan ``task_names`` of ``bundle`` (every task when None), write the plan like a run does
    and return the tasks with their stored versions."""
    from agent_env.bundles.entities import StoredArtifacts, entity_exists
    from agent_env.bundles.find import locate
    from agent_env.bundles.ledger import Ledger
    from agent_env.bundles.parse import parse_bundle
    from agent_env.bundles.plan import plan_bundle
    from agent_env.runtime import current

    text = str(bundle)
    if isinstance(bundle, Path) and not text.startswith((".", "/", "~")):
        text = f"./{text}"
    location = locate(text)
    parsed, problems = parse_bundle(location.folder, location.id_root)
    names = [t.name for t in parsed.tasks] if task_names is None else list(task_names)
    versioned, objects = current().versioned_store, current().object_store
    plan = plan_bundle(parsed, parse_problems=problems, task_names=names,
                       stored=entity_exists(versioned))
    ledger = Ledger(versioned, objects).write_plan(plan)
    artifacts = StoredArtifacts(versioned, objects, ledger.versions.get("artifacts", {}))
    tasks = tuple(
        Task(planned.entry.id, planned.entry.name, planned.spec.raw_steps,
             ledger.version("tasks", planned.entry.id), planned.entry.label, artifacts)
        for planned in plan.tasks)
    # an eval may name a task by stem, file name or tasks/<file>: keep the task's own name
    evals = {entry.name: tuple(task.name for name in entry.task_names
                               if (task := parsed.task(name)) is not None)
             for entry in parsed.evals}
    return BundleTasks(location.folder.name, tasks, evals)


def _preflight(label: str, raw_steps: list[Any], *, stored: bool) -> list[dict[str, Any]]:
    from agent_env.bundles.plan import preflight_stored

    return preflight_stored(label, raw_steps, stored=stored)[0]

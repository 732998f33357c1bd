"""Plan and preflight: which tasks and evals run, and every problem with them, before anything.

Preflight gathers the problems of parsing, of each selected task's steps (types, ids,
``depends_on``, fields, named entities, sandbox providers) and of the selection itself, and
raises them together as one :class:`PreflightFailed`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agent_env.bundles.entities import StoredEntities
from agent_env.bundles.model import Bundle, EvalEntry, TaskEntry
from agent_env.errors import UserError
from agent_env.sandbox.chain import split_chain
from agent_env.tasks.plan import TaskSpec, check_steps
from agent_env.tasks.steps import Step, entity_values, rewrite_entity_refs


class PreflightFailed(UserError):
    """Everything wrong with a bundle or task, one problem per note line."""

    def __init__(self, where: str, problems: Sequence[str]) -> None:
        from agent_env.plural import plural

        super().__init__(f"{where} has {plural(len(problems), 'problem')}; nothing was run:",
                         notes=[f"  {p}" for p in problems])
        self.problems = list(problems)


@attrs.frozen
class PlannedTask:
    entry: TaskEntry
    spec: TaskSpec
    #: kind -> entity ids its steps name (what the ledger must write first)
    references: dict[str, frozenset[str]]
    #: its steps as preflight checked them
    steps: tuple[Step, ...] = ()


@attrs.frozen
class PlannedEval:
    entry: EvalEntry
    task_names: tuple[str, ...]


@attrs.frozen
class BundlePlan:
    bundle: Bundle
    tasks: tuple[PlannedTask, ...]
    evals: tuple[PlannedEval, ...]


def step_registry() -> Mapping[str, type[Step]]:
    from agent_env.runtime import current

    return current().host.registry("step_type")


def references(steps: Sequence[Step]) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for step in steps:
        for field_name, kind in step.entity_fields.items():
            found.setdefault(kind, set()).update(entity_values(step, field_name))
    return {k: frozenset(v) for k, v in found.items()}


def preflight_steps(
    label: str,
    raw_steps: Sequence[Any],
    *,
    entity_names: Mapping[str, Mapping[str, str]],
    registry: Mapping[str, type[Step]],
    stored: StoredEntities | None = None,
    sandbox_chain: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], list[Step], list[str]]:
    """Rewrite entity names to ids, check the steps; returns (raw steps, steps, problems)."""
    from agent_env.plugins.reporting import missing as missing_plugin
    from agent_env.runtime import current

    rewritten = []
    for raw in raw_steps:
        step_class = registry.get(str(raw.get("type"))) if isinstance(raw, dict) else None
        if step_class is not None:
            raw = rewrite_entity_refs(step_class.adapt(dict(raw)), step_class, entity_names)
        rewritten.append(raw)
    known = {kind: set(names.values()) for kind, names in entity_names.items()}
    if stored is not None:  # ids from outside the bundle must already be stored
        for raw in rewritten:
            step_class = registry.get(str(raw.get("type"))) if isinstance(raw, dict) else None
            for field_name, kind in (step_class.entity_fields.items() if step_class else ()):
                for item in entity_values(raw, field_name):
                    if item not in known.get(kind, set()) and stored(kind, item):
                        known.setdefault(kind, set()).add(item)
    host = current().host
    providers = frozenset(host.registry("sandbox_provider"))
    versions = _pinned_versions(rewritten, registry, entity_names, stored)
    steps, problems = check_steps(
        rewritten, registry, {k: frozenset(v) for k, v in known.items()}, providers, versions
    )
    chains = [list(sandbox_chain)] if sandbox_chain else [
        split_chain(str(getattr(s, "sandbox_type", "") or ""))
        for s in steps
    ]
    missing = sorted({name for chain in chains for name in chain if name not in providers})
    for name in missing:
        problems.append(missing_plugin(host, "sandbox_provider", name).message)
    return rewritten, steps, [f"{label}: {p}" for p in problems]


def preflight_stored(label: str, raw_steps: Sequence[Any], *, stored: bool = True,
                     sandbox_chain: Sequence[str] | None = None,
                     ) -> tuple[list[dict[str, Any]], list[Step]]:
    """Preflight steps from outside a bundle (a stored task, an eval's, code's): their ids must
    be stored (``stored``); returns the steps as checked (raw and built), or raises
    PreflightFailed."""
    from agent_env.bundles.entities import entity_exists
    from agent_env.runtime import current

    rewritten, steps, problems = preflight_steps(
        label, raw_steps, entity_names={}, registry=step_registry(),
        stored=entity_exists(current().versioned_store) if stored else None,
        sandbox_chain=sandbox_chain,
    )
    if problems:
        raise PreflightFailed(label, problems)
    return rewritten, steps


def _pinned_versions(raw_steps: Sequence[Any], registry: Mapping[str, type[Step]],
                     entity_names: Mapping[str, Mapping[str, str]],
                     stored: StoredEntities | None) -> dict[tuple[str, str], int]:
    """The highest version each pinned entity may be loaded at: the store's latest, plus one
    for the bundle's own (the run stores it anew when it changed). Without the stores, none."""
    if stored is None:
        return {}
    ours = {kind: set(names.values()) for kind, names in entity_names.items()}
    found: dict[tuple[str, str], int] = {}
    for raw in raw_steps:
        step_class = registry.get(str(raw.get("type"))) if isinstance(raw, dict) else None
        if step_class is None:
            continue
        for id_field in step_class.version_fields.values():
            kind, named = step_class.entity_fields[id_field], raw.get(id_field)
            if isinstance(named, str) and (kind, named) not in found:
                latest = stored.latest(kind, named)
                found[(kind, named)] = latest + (named in ours.get(kind, set()))
    return found


def plan_bundle(
    bundle: Bundle,
    *,
    parse_problems: Sequence[str] = (),
    task_names: Sequence[str] = (),
    eval_names: Sequence[str] = (),
    sandbox_chain: Sequence[str] | None = None,
    stored: StoredEntities | None = None,
) -> BundlePlan:
    """Select what runs and preflight it; raises :class:`PreflightFailed` with all problems."""
    problems = list(parse_problems)
    selected, evals = _select(bundle, task_names, eval_names, problems)
    problems.extend(_env_type_problems(bundle))
    registry = step_registry()
    names = bundle.entity_ids()
    planned = []
    for entry in selected:
        rewritten, steps, found = preflight_steps(
            entry.label, entry.raw_steps, entity_names=names, registry=registry,
            stored=stored, sandbox_chain=sandbox_chain,
        )
        problems.extend(found)
        spec = TaskSpec(entry.id, entry.label, tuple(rewritten))
        planned.append(PlannedTask(entry, spec, references(steps), tuple(steps)))
    if problems:
        raise PreflightFailed(str(bundle.folder), _unique(problems))
    return BundlePlan(bundle, tuple(planned), tuple(evals))


def _env_type_problems(bundle: Bundle) -> list[str]:
    """An env whose type no installed plugin provides would fail only once the run has
    written entities and started sandboxes: say so now, with the plugin that provides it; and
    what its type finds wrong with it (:meth:`~agent_env.env_types.EnvType.bundle_problems`)."""
    from agent_env.plugins.reporting import missing
    from agent_env.runtime import current

    host = current().host
    types = host.registry("env_type")
    problems = []
    for env in bundle.envs:
        kind = types.get(env.type)
        if kind is None:
            problems.append(f"{env.label}: {missing(host, 'env_type', env.type).message}")
        else:  # its own keys, and the envs it names (a multi env's children)
            problems.extend(kind.bundle_problems(env, bundle))
    return problems


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _select(
    bundle: Bundle, task_names: Sequence[str], eval_names: Sequence[str], problems: list[str]
) -> tuple[list[TaskEntry], list[PlannedEval]]:
    available = ", ".join(t.label for t in bundle.tasks) or "none"
    if task_names:
        chosen = []
        for name in task_names:
            entry = bundle.task(name)
            if entry is None:
                problems.append(f"--task {name}: no such task in this bundle (tasks: {available})")
            elif entry not in chosen:
                chosen.append(entry)
        return chosen, []
    if eval_names:
        evals = []
        for eval_name in dict.fromkeys(eval_names):
            named = bundle.eval(eval_name)
            if named is None:
                known = ", ".join(e.label for e in bundle.evals) or "none"
                problems.append(f"--eval {eval_name}: no such eval in this bundle "
                                f"(evals: {known})")
            else:
                evals.append(named)
        if not evals:
            return [], []
    else:
        evals = list(bundle.evals)
    if not evals:
        if not bundle.tasks and not any(bundle.aliases.values()):
            # a bundle with aliases and nothing to run is a library: other bundles name what
            # it holds by alias, and a run of it only writes it
            problems.append("the bundle has no tasks to run")
        return list(bundle.tasks), []
    chosen = []
    planned = []
    for planned_eval in evals:
        names = []
        for name in planned_eval.task_names:
            task = bundle.task(name)
            if task is not None:
                names.append(task.name)
                if task not in chosen:
                    chosen.append(task)
        planned.append(PlannedEval(planned_eval, tuple(names)))
    return chosen, planned

"""A task's steps: checked all at once (preflight), scheduled as a DAG, seeded.

Scheduling rules: when no step declares ``depends_on`` the steps form a
strict chain; when some do, a step without ``depends_on`` waits for every earlier step; a step
may only depend on earlier steps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agent_env._tuples import dict_tuple
from agent_env.tasks.steps import ChoiceProblem, PreflightView, RunChoices, Step, structure_step


@attrs.frozen
class TaskSpec:
    """A task ready to plan: its id, a label for people and its raw steps (ids rewritten)."""

    id: str
    label: str
    raw_steps: tuple[dict[str, Any], ...] = attrs.field(converter=dict_tuple)
    version: int | None = None


def run_needs(tasks: Sequence[tuple[str, Sequence[Step]]], choices: RunChoices) -> list[str]:
    """What a real run of ``tasks`` (label, checked steps) would find missing: every step's
    :meth:`~agent_env.tasks.steps.Step.needs`, labelled, and a choice no step uses. A problem
    with a choice itself (:class:`~agent_env.tasks.steps.ChoiceProblem`) is listed once."""
    from agent_env.agents import DEPLOYS, agent_role
    from agent_env.models import model_problem

    problems: list[str] = []
    for option, model in (("--model", choices.model), ("--user-model", choices.user_model),
                          ("--judge-model", choices.judge_model)):
        if model and (problem := model_problem(model)):
            problems.append(f"{option}: {problem}")
    for label, steps in tasks:
        for step in steps:
            problems.extend(need if isinstance(need, ChoiceProblem)
                            else f"{label}: step '{step.id}': {need}"
                            for need in step.needs(choices))
    if choices.agent and not any(agent_role(s) == DEPLOYS for _, steps in tasks for s in steps):
        problems.append(f"--agent {choices.agent}: no step of this run deploys an agent")
    return list(dict.fromkeys(problems))


def normalise_step(step: Any) -> Any:
    """A step as task files exported by other tools write it, in ours: unset (``null``)
    fields left out, and ``depends_on: [{"task_step_id": "a"}]`` read as ``["a"]``. Every task
    file goes through it (bundle, ``task create``), so an exported task runs unedited."""
    if not isinstance(step, dict):
        return step
    out = {key: value for key, value in step.items() if value is not None}
    depends = out.get("depends_on")
    if isinstance(depends, list):
        out["depends_on"] = [d["task_step_id"] if isinstance(d, dict) and set(d) ==
                             {"task_step_id"} else d for d in depends]
    return out


def step_label(raw: Any, position: int) -> str:
    if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
        return f"step '{raw['id']}'"
    return f"step {position}"


def check_steps(
    raw_steps: Sequence[Any],
    registry: Mapping[str, type[Step]],
    view_entities: Mapping[str, frozenset[str]] | None = None,
    sandbox_providers: frozenset[str] = frozenset(),
    versions: Mapping[tuple[str, str], int] | None = None,
) -> tuple[list[Step], list[str]]:
    """Build the steps and find every problem (not only the first)."""
    problems: list[str] = []
    steps: list[Step] = []
    first_position: dict[str, int] = {}
    for position, raw in enumerate(raw_steps, start=1):
        if not isinstance(raw, Mapping):
            problems.append(f"step {position}: must be an object, not {type(raw).__name__}")
            continue
        step_id = raw.get("id")
        if not isinstance(step_id, str) or not step_id:
            problems.append(f"step {position}: has no 'id' (every step needs a unique id)")
        elif step_id in first_position:
            problems.append(
                f"step {position}: id '{step_id}' is already used by step "
                f"{first_position[step_id]} (step ids must be unique in a task)"
            )
        else:
            first_position[step_id] = position
    earlier: set[str] = set()
    for position, raw in enumerate(raw_steps, start=1):
        if not isinstance(raw, Mapping):
            continue
        label = step_label(raw, position)
        problems.extend(_check_depends_on(raw, label, earlier, first_position))
        step_type = raw.get("type")
        step_class = registry.get(step_type) if isinstance(step_type, str) else None
        if "type" not in raw:
            problems.append(f"{label}: has no 'type' (known: {', '.join(sorted(registry))})")
        elif not isinstance(step_type, str):
            problems.append(f"{label}: 'type' must be a step type's name (a string), not "
                            f"{json_type(step_type)} {_short(step_type)} (known: "
                            f"{', '.join(sorted(registry))})")
        elif step_class is None:
            problems.append(f"{label}: '{step_type}' is not a known step type")
        if isinstance(raw.get("id"), str):
            earlier.add(raw["id"])
        if step_class is None:
            continue
        depends_on = raw.get("depends_on")
        if depends_on is not None and not (
            isinstance(depends_on, list) and all(isinstance(d, str) for d in depends_on)
        ):  # reported above; check the rest of the step all the same
            raw = {k: v for k, v in raw.items() if k != "depends_on"}
        try:
            step = structure_step(step_class, raw)
        except ValueError as exc:
            problems.append(f"{label}: {exc}")
            continue
        steps.append(step)
    view = PreflightView(frozenset(first_position), dict(view_entities or {}), sandbox_providers,
                         dict(versions or {}))
    for step in steps:
        problems.extend(f"step '{step.id}': {p}" for p in step.check(view))
    problems.extend(_check_retries(steps))
    return steps, problems


def _check_depends_on(
    raw: Mapping[str, Any], label: str, earlier: set[str], positions: Mapping[str, int]
) -> list[str]:
    depends_on = raw.get("depends_on")
    if depends_on is None:
        return []
    if not isinstance(depends_on, list) or not all(isinstance(d, str) for d in depends_on):
        return [f"{label}: depends_on must be a list of step ids (e.g. [\"a\"]), not "
                f"{json_type(depends_on)} {_short(depends_on)}"]
    problems = []
    for name in depends_on:
        if name in earlier:
            continue
        if name in positions:
            problems.append(f"{label}: depends_on '{name}' names a later step (a step can only "
                            "depend on steps before it)")
        else:
            problems.append(f"{label}: depends_on '{name}' names no step in this task")
    return problems


def json_type(value: Any) -> str:
    return {str: "a string", dict: "an object", int: "a number", float: "a number",
            bool: "a boolean"}.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    import json

    text = json.dumps(value)
    return text if len(text) < 40 else text[:37] + "..."


def _check_retries(steps: Sequence[Step]) -> list[str]:
    deps = effective_dependencies(steps)
    problems = []
    for step in steps:
        config = step.retry_config
        if config is None:
            continue
        origin = config.retry_from_step_id or step.id
        if origin != step.id and origin not in ancestors(deps, step.id):
            problems.append(
                f"step '{step.id}': retry_config.retry_from_step_id '{origin}' must be the step "
                "itself or a step it depends on"
            )
        if config.max_retries < 0:
            problems.append(f"step '{step.id}': retry_config.max_retries must be 0 or more")
    return problems


# -- the DAG ----------------------------------------------------------------------------------


def effective_dependencies(steps: Sequence[Step]) -> dict[str, tuple[str, ...]]:
    """Each step's prerequisites under the three scheduling rules."""
    declared = any(step.depends_on is not None for step in steps)
    deps: dict[str, tuple[str, ...]] = {}
    for position, step in enumerate(steps):
        if not declared:
            deps[step.id] = (steps[position - 1].id,) if position else ()
        elif step.depends_on is None:
            deps[step.id] = tuple(s.id for s in steps[:position])
        else:
            deps[step.id] = tuple(step.depends_on)
    return deps


def ancestors(deps: Mapping[str, Sequence[str]], step_id: str) -> set[str]:
    found: set[str] = set()
    stack = list(deps.get(step_id, ()))
    while stack:
        current = stack.pop()
        if current not in found:
            found.add(current)
            stack.extend(deps.get(current, ()))
    return found


def descendants(deps: Mapping[str, Sequence[str]], step_id: str) -> set[str]:
    return {other for other in deps if step_id in ancestors(deps, other)}


# -- seeds ------------------------------------------------------------------------------------


def apply_seed(value: Any, seed: Mapping[str, Any]) -> Any:
    """Replace ``<k>`` by ``seed[k]`` in every string of ``value`` (recursively)."""
    if not seed:
        return value
    pattern = re.compile("|".join(re.escape(f"<{k}>") for k in seed))
    texts = {f"<{k}>": str(v) for k, v in seed.items()}

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return pattern.sub(lambda m: texts[m.group(0)], item)
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    return walk(value)

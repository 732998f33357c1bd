"""A step type written for the reference framework, run as one of ours.

:func:`step_class_for` makes a :class:`~agent_env.tasks.steps.Step` subclass whose keys are the
reference class's ``__init__`` parameters (one without a default is required), so preflight
refuses an unknown key or a missing one as it does for our steps. Preflight also builds the
reference step (``from_dict``) and adds its ``config_problems()`` and ``preflight()``. At run
time the step gets a :class:`~agent_env.task_step.context.TaskStepContext` of the run (its
deployed envs with their MCP URLs, its agents, its sandboxes, its answered prompts, the seed
under ``metadata["seed"]``); what ``execute`` writes under ``metadata["verifications"]`` is
recorded as our verifications (its rows, and its ``score`` when it gave one), and any other
metadata key it set is kept in the step's output.
"""

from __future__ import annotations

import copy
import inspect
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from agent_env.tasks.steps import PreflightView, Step, StepError

if TYPE_CHECKING:
    from agent_env.task_step.context import TaskStepContext
    from agent_env.tasks.context import TaskContext

#: ``__init__`` parameters every reference step has, which our Step base already holds.
BASE_PARAMETERS = frozenset({"self", "id", "version", "depends_on", "fail_task_on_error",
                             "retry_config"})


@attrs.define(kw_only=True)
class ReferenceStep(Step):
    """The base of :func:`step_class_for`'s classes."""

    reference_class: ClassVar[Any]
    #: The keys the reference class takes beyond the base ones.
    reference_keys: ClassVar[tuple[str, ...]] = ()

    def reference(self) -> Any:
        """The reference step this one is, built as its ``from_dict`` builds it."""
        data: dict[str, Any] = {"id": self.id, "type": self.type, "version": self.version,
                                "fail_task_on_error": self.fail_task_on_error}
        if self.depends_on is not None:
            data["depends_on"] = [{"task_step_id": d} for d in self.depends_on]
        for key in self.reference_keys:
            value = getattr(self, key)
            if value is not None:  # unset: its from_dict applies its own default
                data[key] = value
        return self.reference_class.from_dict(data)

    def check(self, view: PreflightView) -> list[str]:
        problems = super().check(view)
        try:
            step = self.reference()
        except Exception as exc:  # its own validation, worded by its author
            return [*problems, str(exc) or f"{self.type} refused these keys"]
        for check in ("config_problems", "preflight"):
            try:
                problems += [str(p) for p in getattr(step, check)() or ()]
            except Exception as exc:
                problems.append(f"its {check}() raised: {exc}")
        return problems

    async def run(self, ctx: TaskContext) -> None:
        try:
            step = self.reference()
        except Exception as exc:
            raise StepError(str(exc) or f"{self.type} refused these keys") from None
        context = context_of(ctx)
        before = copy.deepcopy(context.metadata)
        returned = await step.execute(context)
        if returned is not None:
            context = returned
        record_back(ctx, self, before, context)


def reference_steps_plugin(distribution: str, classes: dict[str, Any]) -> ModuleType:
    """A plugin module offering ``classes`` (entry-point name -> a reference step class) through
    ``agent_env_step_types``; TypeError naming any that is not such a class."""
    from agent_env.hookspecs import hookimpl
    from agent_env.task_step.task_step import TaskStep

    steps = {}
    for name, found in classes.items():
        if not (isinstance(found, type) and issubclass(found, TaskStep)):
            raise TypeError(f"its entry point {name} names {found!r}, not a subclass of "
                            "agent_env.task_step.task_step.TaskStep")
        steps[name] = step_class_for(found, name)
    module = ModuleType(f"agent_env_reference_steps[{distribution}]")
    module.__doc__ = f"{distribution}'s step types, written for the reference framework."

    @hookimpl
    def agent_env_step_types() -> list[type[Step]]:
        return list(steps.values())

    module.agent_env_step_types = agent_env_step_types  # type: ignore[attr-defined]
    return module


def step_class_for(reference_class: Any, name: str | None = None) -> type[Step]:
    """Our step class for ``reference_class`` (a subclass of its ``TaskStep``), whose task
    files name it ``name`` (its entry point's name; default: its own ``type``)."""
    fields: dict[str, Any] = {}
    keys = []
    init = reference_class.__init__
    for key, parameter in inspect.signature(init).parameters.items():
        if key in BASE_PARAMETERS or parameter.kind in (parameter.VAR_POSITIONAL,
                                                        parameter.VAR_KEYWORD):
            continue
        keys.append(key)
        required = parameter.default is inspect.Parameter.empty
        fields[key] = attrs.field(type=Any) if required else attrs.field(type=Any, default=None)
    cls: Any = attrs.make_class(f"Reference_{reference_class.__name__}", fields,
                                bases=(ReferenceStep,), kw_only=True)
    cls.type = name or str(reference_class.type)
    cls.reference_class = reference_class
    cls.reference_keys = tuple(keys)
    cls.__doc__ = (inspect.getdoc(reference_class) or
                   f"{reference_class.__name__}, written for the reference framework.")
    return cls


def context_of(ctx: TaskContext) -> TaskStepContext:
    """What a reference step sees of the run so far."""
    from agent_env.task_step.context import (
        DeployedAgent,
        DeployedEnv,
        DeployedSandbox,
        PromptResponse,
        TaskStepContext,
    )

    envs = [DeployedEnv(env_id, getattr(d, "mcp_url", None), getattr(d, "instance_id", None),
                        getattr(d, "env_version", None)) for env_id, d in ctx.envs.items()]
    agents = []
    for name, agent in ctx.agents.items():
        url = str(getattr(agent, "url", "") or "")
        agents.append(DeployedAgent(name, url, url or None,
                                    getattr(getattr(agent, "sandbox", None), "id", None)))
    sandboxes = [DeployedSandbox(name, sandbox.id, sandbox_type=sandbox.provider_name)
                 for name, sandbox in ctx.sandboxes.items()]
    prompts = [PromptResponse(str(o["prompt_id"]), str(o.get("response") or ""),
                              o.get("prompt"), o.get("tool_call_count"), o.get("model"),
                              o.get("error_type"), o.get("error_message"), o.get("agent_name"),
                              step_id)
               for step_id, o in ctx.outputs.items()
               if isinstance(o, dict) and "prompt_id" in o and "response" in o]
    metadata: dict[str, Any] = {"task_id": ctx.task_id, "verifications": {}}
    if ctx.seed:
        metadata["seed"] = dict(ctx.seed)
    return TaskStepContext(envs, agents, sandboxes, prompts, metadata,
                           ctx.choices.model, ctx.instance_id)


def record_back(ctx: TaskContext, step: Step, before: dict[str, Any],
                context: TaskStepContext) -> None:
    """What ``execute`` wrote into ``context.metadata``, recorded on our run."""
    from agent_env.tasks.scores import rows_from_results

    found = context.metadata.get("verifications") or {}
    if not isinstance(found, dict):
        raise StepError("it set metadata['verifications'] to something other than an object")
    for verifier_id, entry in found.items():
        if (before.get("verifications") or {}).get(verifier_id) == entry:
            continue
        if not isinstance(entry, dict):
            raise StepError(f"verification '{verifier_id}' is not an object")
        try:
            rows = rows_from_results(entry.get("results") or [], f"verification '{verifier_id}'")
        except ValueError as exc:
            raise StepError(str(exc)) from None
        score = entry.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float):
            score = None
        ctx.record_verification(step, str(verifier_id), rows, "weighted_average",
                                score=None if score is None else float(score))
    changed = {k: v for k, v in context.metadata.items()
               if k != "verifications" and before.get(k) != v}
    if changed:
        ctx.outputs[step.id] = {"metadata": changed}

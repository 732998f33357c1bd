"""``TaskStep``, ``TaskStepDependency`` and ``RetryConfig`` as the reference framework's
step-type SDK shapes them (see the package doc)."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from agent_env.task_step.context import TaskStepContext


@dataclasses.dataclass
class TaskStepDependency:
    task_step_id: str

    @classmethod
    def from_dict(cls, data: str | dict[str, Any]) -> TaskStepDependency:
        """A ``depends_on`` entry: a step id, or ``{"task_step_id": <id>}``."""
        if isinstance(data, str):
            return cls(task_step_id=data)
        if isinstance(data, dict) and "task_step_id" in data:
            return cls(task_step_id=data["task_step_id"])
        raise ValueError(f'a depends_on entry is a step id or {{"task_step_id": "<step id>"}}, '
                         f"not {data!r}")


def dependencies(raw: Any) -> list[TaskStepDependency] | None:
    """``depends_on`` as written, as dependencies (None stays None: after every earlier step)."""
    if raw is None:
        return None
    if not isinstance(raw, list | tuple):
        raise ValueError(f"depends_on is a list of step ids, not {raw!r}")
    return [d if isinstance(d, TaskStepDependency) else TaskStepDependency.from_dict(d)
            for d in raw]


@dataclasses.dataclass
class RetryConfig:
    """Where a failed step's retry resumes from, and how many retries it gets."""

    retry_from_step_id: str
    max_retries: int = 1

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetryConfig:
        step_id = data.get("retry_from_step_id", data.get("go_to_step_id"))
        if step_id is None:
            raise ValueError("retry_config requires 'retry_from_step_id'")
        retries = data.get("max_retries", 1)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retry_config.max_retries must be an int >= 0, got {retries!r}")
        return cls(step_id, retries)


class TaskStep(ABC):
    """The base of a step type written for the reference framework."""

    type: ClassVar[str] = "task_step"
    DEFAULT_TTL_SECONDS: ClassVar[int] = 7200
    DEFAULT_AGENT_NAME: ClassVar[str] = "default-agent"
    entity_refs: ClassVar[tuple[Any, ...] | None] = None
    field_scopes: ClassVar[dict[str, Any]] = {}

    def __init__(self, id: str, version: int | None, depends_on: list[Any] | None = None,
                 fail_task_on_error: bool = True,
                 retry_config: RetryConfig | dict[str, Any] | None = None) -> None:
        self.id = id
        self.version = version
        self.depends_on = dependencies(depends_on)
        self.fail_task_on_error = fail_task_on_error
        if retry_config is not None and not isinstance(retry_config, RetryConfig):
            retry_config = RetryConfig.from_dict(retry_config)
        self.retry_config = retry_config

    @abstractmethod
    async def execute(self, context: TaskStepContext) -> TaskStepContext | None:
        """Do the step's work on ``context``."""

    def preflight(self) -> list[str]:
        """Problems found before a run, one message each."""
        return []

    def config_problems(self) -> list[str]:
        """Problems in the step's own fields."""
        return []

    def step_param_overrides(self, context: TaskStepContext) -> dict[str, Any]:
        """Per-run overrides of this step's parameters: none are given here."""
        overrides = (context.metadata.get("user_overrides") or {}).get("step_params", {})
        return dict(overrides.get(self.id) or {})

    def to_dict(self) -> dict[str, Any]:
        base: dict[str, Any] = {"id": self.id, "type": self.type, "version": self.version,
                                "fail_task_on_error": self.fail_task_on_error}
        if self.depends_on is not None:
            base["depends_on"] = [dataclasses.asdict(d) for d in self.depends_on]
        if self.retry_config is not None:
            base["retry_config"] = dataclasses.asdict(self.retry_config)
        return base

    @classmethod
    def _base_from_dict(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"id": data["id"], "version": data.get("version"),
                "depends_on": dependencies(data.get("depends_on")),
                "fail_task_on_error": data.get("fail_task_on_error", True)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskStep:
        raise NotImplementedError(f"{cls.__name__} must implement from_dict")

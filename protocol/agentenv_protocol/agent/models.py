"""What an agent author touches: identity, config, the request a turn gets and what it returns.

Only attrs is imported here, so an agent module can be imported (and checked) without loading
aiohttp; the HTTP side lives in ``app`` and is loaded by ``create_app`` / ``serve``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import attrs

from ..parts import DataPart, FilePart, Part, TextPart

if TYPE_CHECKING:
    from .trajectory import TrajectoryWriter

ErrorType = Literal["agent_error", "infra_error"]
ERROR_TYPES: tuple[str, ...] = ("agent_error", "infra_error")

WRITE_ONLY_KEY = "agentenv.write_only"


def _tuple(value: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(value)


@attrs.define(frozen=True)
class AgentSkill:
    """One skill on the card (A2A ``AgentSkill``); clients require id, name, description, tags."""

    id: str
    name: str
    description: str
    tags: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    examples: tuple[str, ...] | None = None
    input_modes: tuple[str, ...] | None = None
    output_modes: tuple[str, ...] | None = None


@attrs.define(frozen=True)
class AgentIdentity:
    """Who the agent is: the card's descriptive fields. ``url`` stays relative, as on the wire."""

    name: str
    description: str = ""
    version: str = "0.1.0"
    input_modes: tuple[str, ...] = attrs.field(default=("text/plain",), converter=_tuple)
    output_modes: tuple[str, ...] = attrs.field(default=("text/plain",), converter=_tuple)
    skills: tuple[AgentSkill | Mapping[str, Any], ...] = attrs.field(default=(),
                                                                      converter=_tuple)
    url: str = "/a2a"


def write_only(default: Any = None, **kwargs: Any) -> Any:
    """An agent-config field that can be set but never read back (an API key): ``"***"``."""
    metadata = {**kwargs.pop("metadata", {}), WRITE_ONLY_KEY: True}
    return attrs.field(default=default, metadata=metadata, **kwargs)


def _positive_or_none(_: Any, attribute: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"'{attribute.name}' must be more than 0, not {value!r}")


@attrs.define
class AgentConfig:
    """The agent-config/v1 base fields; subclass (with ``@attrs.define``) to add an agent's own.

    Every field needs a default: a partial set must always produce a whole config.
    """

    name: str | None = None
    description: str | None = None
    role: str | None = None
    timeout_seconds: float | None = attrs.field(default=600.0, validator=_positive_or_none)


@attrs.define(frozen=True)
class McpServer:
    """An MCP server the runtime registered through mcp-config/v1 (headers included)."""

    name: str
    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict)


@attrs.define
class Usage:
    """Counters the agent updates while it works; reported in the final reply's data part."""

    tool_call_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int | None = None
    cost_usd: float | None = None
    provider_details: dict[str, Any] | None = None

    def add_tool_call(self, count: int = 1) -> None:
        self.tool_call_count += count

    def add_tokens(self, input_tokens: int = 0, output_tokens: int = 0) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens

    def add_cost(self, usd: float) -> None:
        self.cost_usd = (self.cost_usd or 0.0) + usd

    def to_wire(self) -> dict[str, Any]:
        """``total_tokens`` defaults to input + output; ``cost_usd`` only when known."""
        out: dict[str, Any] = {
            "tool_call_count": self.tool_call_count,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": (self.total_tokens if self.total_tokens is not None
                             else self.input_tokens + self.output_tokens),
        }
        if self.cost_usd is not None:
            out["cost_usd"] = self.cost_usd
        if self.provider_details is not None:
            out["provider_details"] = self.provider_details
        return out


@attrs.define(frozen=True)
class Progress:
    """A streaming agent's interim update: a ``working`` status event with this text/data."""

    text: str | None = None
    data: dict[str, Any] | None = None

    def parts(self) -> list[Part]:
        out: list[Part] = []
        if self.text:
            out.append(TextPart(self.text))
        if self.data is not None:
            out.append(DataPart(self.data))
        return out


@attrs.define(frozen=True)
class Artifact:
    """An output the task produced (A2A ``Artifact``); yielded or returned in ``TaskResult``."""

    parts: tuple[Part, ...] = attrs.field(converter=_tuple)
    name: str | None = None
    description: str | None = None
    artifact_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)


@attrs.define
class TaskResult:
    """What a turn ends with. An ``error_type`` makes the task ``failed``; ``input_required``
    ends it in ``input-required`` so the next message with the same task id continues it."""

    text: str = ""
    structured_output: Any = None
    parts: list[Part] = attrs.field(factory=list)
    artifacts: list[Artifact] = attrs.field(factory=list)
    error_type: ErrorType | None = None
    error_code: str | None = None
    error_message: str | None = None
    usage: Usage | None = None
    input_required: bool = False

    def __attrs_post_init__(self) -> None:
        if self.error_type is not None and self.error_type not in ERROR_TYPES:
            raise ValueError(f"error_type must be one of {list(ERROR_TYPES)}, "
                             f"got {self.error_type!r}")

    @classmethod
    def failure(cls, message: str, *, code: str = "agent.failed",
                error_type: ErrorType = "agent_error") -> TaskResult:
        """A failed turn the agent itself reports (the framework reports ``infra_error``s)."""
        return cls(error_type=error_type, error_code=code, error_message=message)

    def is_empty(self) -> bool:
        """An empty success says nothing; the framework refuses it rather than pass it on."""
        return (self.error_type is None and not self.text and self.structured_output is None
                and not self.parts and not self.artifacts)


C = TypeVar("C", bound=AgentConfig)


async def _no_checkpoint() -> None:
    """A request made outside an agent server (a test's) has no changelog to write."""


@attrs.define
class TaskRequest(Generic[C]):
    """One turn: the user's parts plus everything the runtime configured before it."""

    task_id: str
    context_id: str
    parts: list[Part]
    config: C
    mcp_servers: dict[str, McpServer]
    metadata: dict[str, Any]
    trajectory: TrajectoryWriter
    usage: Usage = attrs.field(factory=Usage)
    message_id: str | None = None
    #: Skills the runtime added through skill-config/v1 (name -> ``skills.Skill``).
    skills: dict[str, Any] = attrs.field(factory=dict)
    #: The context's trajectory events before this turn (its earlier turns, or a snapshot or
    #: changelog loaded into it): an agent that keeps a conversation rebuilds it from these.
    context_events: list[Any] = attrs.field(factory=list)
    #: ``await request.checkpoint()`` after a tool call: when the runtime enabled snapshot/v1's
    #: changelog, what changed since the last increment becomes one (a no-op otherwise).
    checkpoint: Callable[[], Awaitable[Any]] = attrs.field(default=_no_checkpoint)

    @property
    def text(self) -> str:
        """The text parts joined by newlines (most agents want only this)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def data(self) -> list[dict[str, Any]]:
        return [p.data for p in self.parts if isinstance(p, DataPart)]

    @property
    def files(self) -> list[FilePart]:
        return [p for p in self.parts if isinstance(p, FilePart)]

"""The reference framework's agent SDK, by its names and shapes, over this package's own.

An agent written for the reference (``from agentenv_protocol.a2a_agent import ...``) imports
and serves unchanged::

    class EchoConfig(AgentConfig):          # its pydantic style: annotated fields, defaults
        model: str | None = None
        api_key: WriteOnly[str | None] = None

    @a2a_agent(identity=AgentIdentity(name="echo", description="...", version="1.0.0"),
               config=EchoConfig, extensions=(MCP_CONFIG_V1, enable(TRAJECTORY_V1, live=True)))
    class Echo(AgentEnvAgent):
        async def run(self, request: TaskRequest[EchoConfig]) -> TaskResult:
            text = "\\n".join(p.text for p in request.parts if isinstance(p, TextPart))
            return TaskResult.builder().succeeded().parts([TextPart(text=text)]).build()

        @extension(SKILL_CONFIG_V1.add.inline)
        async def add_inline_skill(self, request: InlineSkillRequest) -> dict[str, str]: ...

    Echo().serve()

What happens underneath: an ``AgentConfig`` subclass becomes an attrs class (``WriteOnly[T]``
fields are write-only), the request ``run`` gets has the reference's frozen shape (flat
``FilePart(uri=, bytes=, name=, mime_type=)``), and the ``TaskResult`` it returns (built, or
``TaskResult.text(...)``/``failure(...)``) and the ``TaskProgress`` a streaming ``run`` yields are
turned into this SDK's. ``@extension`` handlers of skill-config/v1 are called as skills are
added. What is not served here is said, never faked: the extensions this SDK does not implement
(proxy, attribution probe) are left off the card with a warning,
and ``@extension`` on any other operation, or a Starlette ``lifespan``, is a TypeError when the
class is defined.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

import attrs

from .agent import framework as _framework
from .agent import models as _models
from .agent.models import AgentIdentity
from .parts import DataPart as _DataPart
from .parts import FileContent as _FileContent
from .parts import FilePart as _FilePart
from .parts import TextPart as _TextPart

__all__ = [
    "AGENT_CONFIG_V1", "ATTRIBUTION_PROBE_V1", "INSTALL_V1", "MCP_CONFIG_V1", "PEER_AGENTS_V1",
    "PROXY_V1", "SKILL_CONFIG_V1", "SNAPSHOT_V1", "TRAJECTORY_V1", "TRIGGERS_V1",
    "AgentConfig", "AgentEnvAgent", "AgentIdentity", "BundleSkillRequest", "DataPart",
    "ExtensionActivation", "ExtensionDefinition", "FilePart", "InlineSkillRequest",
    "NativeTrajectory", "OperationReference", "ReadObject", "SkillBundle", "SkillBundleFile",
    "TaskError", "TaskOutcome", "TaskProgress", "TaskRequest", "TaskResult",
    "TaskResultBuilder", "TextPart", "Usage", "WriteOnly", "a2a_agent", "create_app",
    "download", "enable", "extension", "serve",
]

_log = logging.getLogger("agentenv_protocol.a2a_agent")


# -- extensions -------------------------------------------------------------------------------


class OperationReference:
    """``SKILL_CONFIG_V1.add`` / ``SKILL_CONFIG_V1.add.inline``: what ``@extension`` binds."""

    def __init__(self, definition: ExtensionDefinition, name: str,
                 variants: Iterable[str] = (), variant: str | None = None) -> None:
        self.extension_definition = definition
        self.name = name
        self.variant = variant
        for item in variants:
            setattr(self, item, OperationReference(definition, name, (), item))

    def __repr__(self) -> str:
        return f"{self.extension_definition.uri}#{self.name}" + (
            f".{self.variant}" if self.variant else "")


class ExtensionDefinition(str):
    """An extension by its URI (a ``str``, so it reads as one), with its operations as
    attributes (``.add``, ``.add.inline``)."""

    uri: str

    def __new__(cls, uri: str, operations: Mapping[str, Iterable[str]] | None = None,
                ) -> ExtensionDefinition:
        self = super().__new__(cls, uri)
        self.uri = uri
        for name, variants in (operations or {}).items():
            setattr(self, name, OperationReference(self, name, variants))
        return self


@dataclass(frozen=True)
class ExtensionActivation:
    """An extension turned on with options (``enable(TRAJECTORY_V1, live=True)``)."""

    definition: ExtensionDefinition
    options: Mapping[str, Any] = field(default_factory=dict)


def enable(definition: ExtensionDefinition, **options: Any) -> ExtensionActivation:
    """The reference's way to list an extension with options. Its options (``live`` for the
    trajectory) change nothing here: the trajectory is readable while a task runs anyway."""
    return ExtensionActivation(definition, options)


AGENT_CONFIG_V1 = ExtensionDefinition(_framework.AGENT_CONFIG_V1, {"set": ()})
MCP_CONFIG_V1 = ExtensionDefinition(_framework.MCP_CONFIG_V1, {"add": (), "list": ()})
SKILL_CONFIG_V1 = ExtensionDefinition(_framework.SKILL_CONFIG_V1,
                                      {"add": ("inline", "bundle"), "list": ()})
TRAJECTORY_V1 = ExtensionDefinition(_framework.TRAJECTORY_V1, {"get": ("task", "context")})
SNAPSHOT_V1 = ExtensionDefinition(_framework.SNAPSHOT_V1, {"save": (), "load": ()})
TRIGGERS_V1 = ExtensionDefinition(_framework.TRIGGERS_V1, {"register": (), "decide": ()})
PEER_AGENTS_V1 = ExtensionDefinition(_framework.PEER_AGENTS_V1, {"set": ()})
INSTALL_V1 = ExtensionDefinition(_framework.INSTALL_V1, {"install": ()})
PROXY_V1 = ExtensionDefinition("urn:agentenv:proxy/v1", {"next": ()})
ATTRIBUTION_PROBE_V1 = ExtensionDefinition("urn:agentenv:attribution-probe/v1", {"probe": ()})
#: The extensions this SDK serves; the others are left off the card.
SERVED = frozenset(_framework.KNOWN_EXTENSIONS)


def extension(operation: OperationReference) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Bind a method to an operation. Here: skill-config/v1's ``add.inline`` and
    ``add.bundle``, called as the runtime adds a skill."""
    if not isinstance(operation, OperationReference):
        raise TypeError("@extension expects an operation, such as SKILL_CONFIG_V1.add.inline")
    if (operation.extension_definition.uri, operation.name) != (SKILL_CONFIG_V1.uri, "add") \
            or operation.variant is None:
        raise TypeError(f"@extension({operation!r}): only skill-config/v1 add.inline and "
                        "add.bundle handlers are served by this SDK")

    def bind(function: Callable[..., Any]) -> Callable[..., Any]:
        function.__reference_operation__ = operation  # type: ignore[attr-defined]
        return function

    return bind


# -- config -----------------------------------------------------------------------------------

_T = TypeVar("_T")


class _WriteOnlyMark:
    def __repr__(self) -> str:
        return "WriteOnly"


_WRITE_ONLY = _WriteOnlyMark()
#: ``WriteOnly[str | None]``: a config field that can be set but is never read back.
WriteOnly = Annotated[_T, _WRITE_ONLY]


@attrs.define(slots=False)
class AgentConfig(_models.AgentConfig):
    """Subclass it the reference's (pydantic) way: annotated fields with defaults. Each
    subclass is made an attrs class when it is defined."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = inspect.get_annotations(cls)
        if not own or "__attrs_attrs__" in cls.__dict__:
            return
        hints = typing.get_type_hints(cls, include_extras=True)
        annotations = dict(own)
        for name in own:
            hint: Any = hints.get(name)
            if typing.get_origin(hint) is Annotated and _WRITE_ONLY in hint.__metadata__:
                annotations[name] = hint.__origin__
                setattr(cls, name, _models.write_only(cls.__dict__.get(name)))
            elif hint is not None:
                annotations[name] = hint
        cls.__annotations__ = annotations
        if "model_config" in cls.__dict__:  # pydantic's settings: nothing to do here
            delattr(cls, "model_config")
        attrs.define(cls, slots=False)

    def model_dump(self) -> dict[str, Any]:
        """Its fields as a dict (pydantic's name for it)."""
        return attrs.asdict(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> AgentConfig:
        return attrs.evolve(self, **dict(update or {}))


ConfigT = TypeVar("ConfigT", bound=_models.AgentConfig)


# -- parts, request and result ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    text: str
    kind: Literal["text"] = "text"
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class FilePart:
    name: str | None = None
    mime_type: str | None = None
    bytes: str | None = None
    uri: str | None = None
    kind: Literal["file"] = "file"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.bytes is None) == (self.uri is None):
            raise ValueError("a file part requires exactly one of bytes or uri")


@dataclass(frozen=True, slots=True, kw_only=True)
class DataPart:
    data: Mapping[str, Any]
    kind: Literal["data"] = "data"
    metadata: Mapping[str, Any] = field(default_factory=dict)


TaskPart = TextPart | FilePart | DataPart


def _theirs(part: Any) -> TaskPart:
    meta = dict(part.metadata or {})
    if isinstance(part, _TextPart):
        return TextPart(text=part.text, metadata=meta)
    if isinstance(part, _FilePart):
        f = part.file
        return FilePart(name=f.name, mime_type=f.mime_type, bytes=f.bytes, uri=f.uri,
                        metadata=meta)
    return DataPart(data=dict(part.data), metadata=meta)


def _ours(part: TaskPart) -> Any:
    meta = dict(part.metadata) or None
    if isinstance(part, TextPart):
        return _TextPart(part.text, meta)
    if isinstance(part, FilePart):
        return _FilePart(_FileContent(bytes=part.bytes, uri=part.uri, mime_type=part.mime_type,
                                      name=part.name), meta)
    if isinstance(part, DataPart):
        return _DataPart(dict(part.data), meta)
    raise TypeError(f"a result part must be a TextPart, FilePart or DataPart, not {part!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRequest(Generic[ConfigT]):
    """One turn, in the reference's frozen shape; ``trajectory`` takes ``set_format`` and
    ``append`` as there."""

    task_id: str
    context_id: str
    parts: tuple[TaskPart, ...]
    config: ConfigT
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    skills: tuple[Mapping[str, Any], ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    session_ref: str | None = None
    workspace: Path | None = None
    trajectory: Any = field(default=None, repr=False, compare=False)


class TaskOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskError:
    code: str
    message: str
    error_type: Literal["agent_error", "infra_error"] = "agent_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeTrajectory:
    format: str
    payload: Any
    version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """What a turn cost; a count left None is not reported."""

    tool_call_count: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    provider_details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tool_call_count", "input_tokens", "output_tokens", "total_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise ValueError(f"{name} cannot be negative")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskResult:
    """What ``run`` returns: built with ``TaskResult.builder()``, or ``text`` / ``success`` /
    ``failure``."""

    outcome: TaskOutcome
    parts: tuple[TaskPart, ...] = ()
    error: TaskError | None = None
    session_ref: str | None = None
    usage: Usage = field(default_factory=Usage)
    native_trajectory: NativeTrajectory | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))
        if self.outcome is TaskOutcome.SUCCEEDED and self.error is not None:
            raise ValueError("a successful result cannot contain an error")
        if self.outcome is TaskOutcome.SUCCEEDED and not self.parts:
            raise ValueError("a successful result requires at least one part")
        if self.outcome is TaskOutcome.FAILED and self.error is None:
            raise ValueError("a failed result requires an error")

    @classmethod
    def builder(cls) -> TaskResultBuilder:
        return TaskResultBuilder()

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> TaskResult:
        return cls.success(parts=(TextPart(text=text),), **kwargs)

    @classmethod
    def success(cls, *, parts: Iterable[TaskPart] = (), session_ref: str | None = None,
                usage: Usage | None = None,
                native_trajectory: NativeTrajectory | None = None) -> TaskResult:
        return cls(outcome=TaskOutcome.SUCCEEDED, parts=tuple(parts), session_ref=session_ref,
                   usage=usage or Usage(), native_trajectory=native_trajectory)

    @classmethod
    def failure(cls, code: str, message: str, *,
                error_type: Literal["agent_error", "infra_error"] = "agent_error",
                parts: Iterable[TaskPart] | None = None) -> TaskResult:
        return cls(outcome=TaskOutcome.FAILED,
                   parts=tuple(parts if parts is not None else (TextPart(text=message),)),
                   error=TaskError(code=code, message=message, error_type=error_type))

    def _ours(self) -> _models.TaskResult:
        parts = [_ours(p) for p in self.parts]
        structured = next((p.data["structured_output"] for p in self.parts
                           if isinstance(p, DataPart) and "structured_output" in p.data), None)
        u = self.usage
        usage = _models.Usage(u.tool_call_count or 0, u.input_tokens or 0, u.output_tokens or 0,
                              u.total_tokens, u.cost_usd,
                              dict(u.provider_details) or None)
        if self.error is None:
            return _models.TaskResult(parts=parts, structured_output=structured, usage=usage)
        return _models.TaskResult(parts=parts, usage=usage, error_type=self.error.error_type,
                                  error_code=self.error.code, error_message=self.error.message)


class TaskResultBuilder:
    """Assembles a :class:`TaskResult`; ``build`` checks it."""

    def __init__(self) -> None:
        self._outcome: TaskOutcome | None = None
        self._parts: list[TaskPart] = []
        self._error: TaskError | None = None
        self._session_ref: str | None = None
        self._usage = Usage()
        self._native: NativeTrajectory | None = None

    def succeeded(self) -> TaskResultBuilder:
        self._outcome, self._error = TaskOutcome.SUCCEEDED, None
        return self

    def failed(self, code: str, message: str, *,
               error_type: Literal["agent_error", "infra_error"] = "agent_error",
               ) -> TaskResultBuilder:
        self._outcome = TaskOutcome.FAILED
        self._error = TaskError(code=code, message=message, error_type=error_type)
        return self

    def parts(self, parts: Iterable[TaskPart]) -> TaskResultBuilder:
        self._parts = list(parts)
        return self

    def add_text(self, text: str, *, metadata: Mapping[str, Any] | None = None,
                 ) -> TaskResultBuilder:
        self._parts.append(TextPart(text=text, metadata=metadata or {}))
        return self

    def add_data(self, data: Mapping[str, Any], *, metadata: Mapping[str, Any] | None = None,
                 ) -> TaskResultBuilder:
        self._parts.append(DataPart(data=data, metadata=metadata or {}))
        return self

    def add_structured_output(self, value: Any) -> TaskResultBuilder:
        return self.add_data({"structured_output": value})

    def session_ref(self, value: str | None) -> TaskResultBuilder:
        self._session_ref = value
        return self

    def usage(self, value: Usage) -> TaskResultBuilder:
        if not isinstance(value, Usage):
            raise TypeError("usage must be a Usage instance")
        self._usage = value
        return self

    def native_trajectory(self, *, format: str, payload: Any, version: int = 1,
                          ) -> TaskResultBuilder:
        self._native = NativeTrajectory(format=format, payload=payload, version=version)
        return self

    def build(self) -> TaskResult:
        if self._outcome is None:
            raise ValueError("task result outcome is required; call succeeded() or failed()")
        return TaskResult(outcome=self._outcome, parts=tuple(self._parts), error=self._error,
                          session_ref=self._session_ref, usage=self._usage,
                          native_trajectory=self._native)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskProgress:
    """A streaming ``run``'s interim update."""

    parts: tuple[TaskPart, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def text(cls, text: str, *, metadata: Mapping[str, Any] | None = None) -> TaskProgress:
        return cls(parts=(TextPart(text=text),), metadata=metadata or {})

    def _ours(self) -> _models.Progress:
        text = "\n".join(p.text for p in self.parts if isinstance(p, TextPart)) or None
        data = next((dict(p.data) for p in self.parts if isinstance(p, DataPart)), None)
        return _models.Progress(text, data)


def _request(request: _models.TaskRequest[Any]) -> TaskRequest[Any]:
    servers = {name: {"name": s.name, "url": s.url, "headers": dict(s.headers)}
               for name, s in request.mcp_servers.items()}
    skills = tuple({"name": s.name, "description": s.description, "files": sorted(s.files)}
                   for s in request.skills.values())
    return TaskRequest(task_id=request.task_id, context_id=request.context_id,
                       parts=tuple(_theirs(p) for p in request.parts), config=request.config,
                       mcp_servers=servers, skills=skills, metadata=dict(request.metadata),
                       trajectory=request.trajectory)


def _result(value: Any) -> Any:
    if isinstance(value, TaskResult | TaskProgress):
        return value._ours()
    return value


def _wrap_run(run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` taking and returning the reference's shapes, as this SDK calls it."""
    if inspect.isasyncgenfunction(run):
        async def streaming(self: Any, request: Any) -> AsyncIterator[Any]:
            async for item in run(self, _request(request)):
                yield _result(item)

        streaming.__reference_run__ = True  # type: ignore[attr-defined]
        return streaming
    if inspect.iscoroutinefunction(run):
        async def single(self: Any, request: Any) -> Any:
            return _result(await run(self, _request(request)))

        single.__reference_run__ = True  # type: ignore[attr-defined]
        return single
    return run  # not async: this SDK's decorator says why


# -- skills -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadObject:
    """An object to read; here the runtime has already read a skill's files (size and hash
    checked), so ``data`` holds them."""

    data: bytes
    max_bytes: int = 0


@dataclass(frozen=True)
class InlineSkillRequest:
    name: str
    description: str
    skill_md: str


@dataclass(frozen=True)
class SkillBundleFile:
    path: str
    object: ReadObject


@dataclass(frozen=True)
class SkillBundle:
    max_total_bytes: int
    files: list[SkillBundleFile]


@dataclass(frozen=True)
class BundleSkillRequest:
    name: str
    description: str
    skill_bundle: SkillBundle


async def download(obj: Any, destination: str | Path) -> Path:
    """Write ``obj`` (a :class:`ReadObject`, or a read grant as the wire has it) to
    ``destination``, making its folders."""
    path = Path(destination)
    if isinstance(obj, ReadObject):
        data = obj.data
    else:
        from .transfer import read_object, read_object_from_wire

        data = await read_object(read_object_from_wire(obj))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def create_app(agent: Any) -> Any:
    """The agent's A2A server as an aiohttp application (this SDK's ``create_app``)."""
    from .agent.app import create_app as create

    return create(agent)


def serve(agent: Any, host: str | None = None, port: int | None = None) -> None:
    """Serve ``agent`` until interrupted (``A2A_HOST`` / ``A2A_PORT``, else 0.0.0.0:8000)."""
    from .agent.app import serve as run_server

    run_server(agent, host=host, port=port)


# -- the agent --------------------------------------------------------------------------------


class AgentEnvAgent(_framework.AgentEnvAgent):
    """Subclass it and implement ``run`` as for the reference (see the module docstring)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run")
        if run is not None and not getattr(run, "__reference_run__", False):
            cls.run = _wrap_run(run)  # type: ignore[method-assign]

    async def skill_added(self, skill: Any) -> None:
        handlers = _skill_handlers(type(self))
        if skill.inline and "inline" in handlers:
            await handlers["inline"](self, InlineSkillRequest(skill.name, skill.description,
                                                              skill.skill_md))
        elif "bundle" in handlers:
            files = [SkillBundleFile(path, ReadObject(data, len(data)))
                     for path, data in sorted(skill.files.items())]
            total = sum(len(d) for d in skill.files.values())
            await handlers["bundle"](self, BundleSkillRequest(
                skill.name, skill.description, SkillBundle(total, files)))
        elif "inline" in handlers:  # a bundle of SKILL.md alone reads as inline
            if set(skill.files) == {"SKILL.md"}:
                await handlers["inline"](self, InlineSkillRequest(
                    skill.name, skill.description, skill.skill_md))


def _skill_handlers(cls: type) -> dict[str, Callable[..., Any]]:
    found: dict[str, Callable[..., Any]] = {}
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            operation = getattr(value, "__reference_operation__", None)
            if operation is not None and operation.variant is not None:
                found[operation.variant] = value
    return found


def a2a_agent(
    *,
    identity: AgentIdentity,
    extensions: Iterable[ExtensionDefinition | ExtensionActivation | str] = (),
    config: type[_models.AgentConfig] | None = None,
    config_description: str | None = None,
    config_readback: bool = True,
    lifespan: Any = None,
    workspace: str | Path | None = None,
) -> Callable[[type], type]:
    """The reference's decorator. ``config_description`` and ``config_readback`` are taken
    (this SDK's card describes the config fields itself, and never reads back write-only
    ones); ``workspace`` is the folder snapshot/v1 saves."""
    if lifespan is not None:
        raise TypeError("a2a_agent: lifespan is a Starlette hook, which this SDK does not run; "
                        "use setup() and teardown() on the agent class")
    uris: list[str] = []
    for item in extensions:
        definition = item.definition if isinstance(item, ExtensionActivation) else item
        uri = str(getattr(definition, "uri", definition))
        if uri in SERVED:
            uris.append(uri)
        else:
            _log.warning("a2a_agent: %s is not served by this SDK; it is left off the card", uri)

    def wrap(cls: type) -> type:
        if _skill_handlers(cls) and SKILL_CONFIG_V1.uri not in uris:
            uris.append(SKILL_CONFIG_V1.uri)
        if workspace is not None:
            cls.workspace = str(workspace)  # type: ignore[attr-defined]
        decorated: type = _framework.a2a_agent(identity=identity, config=config,
                                               extensions=uris)(cls)
        return decorated

    return wrap


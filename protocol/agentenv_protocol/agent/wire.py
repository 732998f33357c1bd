"""A2A 0.3.0 on the wire: the shapes we send and read, and the converters at the edges.

Classes here are attrs with snake_case names; the converter renames them to the camelCase the
protocol uses and drops ``None`` (A2A omits absent optionals). Reading is lenient about extra
keys (clients add fields across 0.3.x) but strict about types, so a bad request is a -32602
rather than a surprise inside the agent. Extension bodies use a second converter that forbids
unknown keys, as the reference's request models do.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..parts import DataPart, FilePart, Part, PartError, TextPart, part_from_wire

PROTOCOL_VERSION = "0.3.0"

# JSON-RPC 2.0 and A2A error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
EXTENDED_CARD_NOT_CONFIGURED = -32007

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})


def now() -> str:
    """An ISO 8601 UTC timestamp, as A2A status timestamps are."""
    return _dt.datetime.now(_dt.UTC).isoformat()


@attrs.define
class Message:
    message_id: str
    role: str
    parts: list[Part]
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] | None = None
    reference_task_ids: list[str] | None = None
    kind: str = "message"


@attrs.define
class TaskStatus:
    state: str
    message: Message | None = None
    timestamp: str | None = None


@attrs.define
class WireArtifact:
    artifact_id: str
    parts: list[Part]
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


@attrs.define
class Task:
    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[WireArtifact] | None = None
    history: list[Message] | None = None
    metadata: dict[str, Any] | None = None
    kind: str = "task"


@attrs.define
class TaskStatusUpdateEvent:
    task_id: str
    context_id: str
    status: TaskStatus
    final: bool
    metadata: dict[str, Any] | None = None
    kind: str = "status-update"


@attrs.define
class TaskArtifactUpdateEvent:
    task_id: str
    context_id: str
    artifact: WireArtifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: dict[str, Any] | None = None
    kind: str = "artifact-update"


@attrs.define
class MessageSendConfiguration:
    accepted_output_modes: list[str] | None = None
    blocking: bool | None = None
    history_length: int | None = None
    push_notification_config: dict[str, Any] | None = None


@attrs.define
class MessageSendParams:
    message: Message
    configuration: MessageSendConfiguration | None = None
    metadata: dict[str, Any] | None = None


@attrs.define
class TaskQueryParams:
    id: str
    history_length: int | None = None
    metadata: dict[str, Any] | None = None


@attrs.define
class TaskIdParams:
    id: str
    metadata: dict[str, Any] | None = None


_WIRE_CLASSES = frozenset({
    Message, TaskStatus, WireArtifact, Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent,
    MessageSendConfiguration, MessageSendParams, TaskQueryParams, TaskIdParams,
})


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)




def _strict(tp: type, accept: tuple[type, ...]) -> Callable[[Any, Any], Any]:
    """cattrs' default ``str``/``int`` hooks convert anything (``str(5)``); we refuse instead."""

    def hook(value: Any, _: Any) -> Any:
        if type(value) not in accept:  # exact: a bool is not an int here
            raise TypeError(f"expected {tp.__name__}, got {type(value).__name__}")
        if tp is float:
            # Python's json reads Infinity and NaN, and 1e400 as inf: no field means them
            if not math.isfinite(value):
                raise ValueError(f"expected a finite number, got {value!r}")
            return float(value)
        return value

    return hook


def _structure_part(value: Any, _: Any) -> Part:
    try:
        return part_from_wire(value)
    except PartError as exc:
        raise ValueError(str(exc).replace("parts[0]", "part")) from None


def strict_converter(*, forbid_extra_keys: bool) -> cattrs.Converter:
    """A converter whose primitives do not coerce, for everything that comes in."""
    conv = cattrs.Converter(forbid_extra_keys=forbid_extra_keys)
    conv.register_structure_hook(str, _strict(str, (str,)))
    conv.register_structure_hook(int, _strict(int, (int,)))
    conv.register_structure_hook(float, _strict(float, (int, float)))
    conv.register_structure_hook(bool, _strict(bool, (bool,)))
    conv.register_structure_hook_func(lambda t: t == Part, _structure_part)
    for cls in (TextPart, FilePart, DataPart):
        conv.register_unstructure_hook(cls, lambda p: p.to_wire())
    return conv


def _drop_none(fn: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    def unstructure(obj: Any) -> dict[str, Any]:
        return {k: v for k, v in fn(obj).items() if v is not None}

    return unstructure


def _wire_converter() -> cattrs.Converter:
    conv = strict_converter(forbid_extra_keys=False)

    def renames(cls: type) -> dict[str, Any]:
        return {a.name: override(rename=camel(a.name)) for a in attrs.fields(cls)
                if camel(a.name) != a.name}

    conv.register_unstructure_hook_factory(
        lambda t: t in _WIRE_CLASSES,
        lambda cls: _drop_none(make_dict_unstructure_fn(cls, conv, **renames(cls))),
    )
    conv.register_structure_hook_factory(
        lambda t: t in _WIRE_CLASSES,
        lambda cls: make_dict_structure_fn(cls, conv, **renames(cls)),
    )
    return conv


WIRE = _wire_converter()
EXTENSION = strict_converter(forbid_extra_keys=True)


def _format(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown field(s): {', '.join(sorted(exc.extra_fields))}"
    if isinstance(exc, (TypeError, ValueError)) and str(exc):
        return str(exc)
    return f"invalid value ({type(exc).__name__})"


def describe(exc: Exception, *, path: str = "params", camel_case: bool = True) -> str:
    """One line naming what is wrong with a structured body (cattrs' errors are groups)."""
    if not isinstance(exc, cattrs.BaseValidationError):
        return str(exc)
    lines = cattrs.transform_error(exc, path=path, format_exception=_format)
    if camel_case:
        lines = [re.sub(r"\.([a-z_]+)", lambda m: "." + camel(m.group(1)), line)
                 for line in lines]
    return "; ".join(lines)


def rpc_result(msg_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def rpc_error(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": err}

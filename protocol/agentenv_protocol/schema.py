"""JSON Schemas from type hints, and coercion of wire values to those hints.

Tools and extensions declare their inputs as annotated Python parameters; this module turns the
annotations into the ``inputSchema`` advertised on MCP and the card, and turns incoming JSON (or
query-string text) back into the annotated types. pydantic is never imported: a description
comes from any ``Annotated`` metadata object with a ``description`` attribute (pydantic's
``Field`` included) or from a plain string.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import enum
import inspect
import json
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

_MISSING = inspect.Parameter.empty


class CoercionError(ValueError):
    """A value that does not fit its annotated type."""


@attrs.define(frozen=True)
class ParamSpec:
    """One declared input of a tool or extension handler."""

    name: str
    annotation: Any
    default: Any = _MISSING
    description: str | None = None

    @property
    def required(self) -> bool:
        return self.default is _MISSING


def split_annotated(tp: Any) -> tuple[Any, str | None]:
    """Strip ``Annotated`` and return (inner type, description found in its metadata)."""
    description = None
    if typing.get_origin(tp) is typing.Annotated:
        inner, *extras = typing.get_args(tp)
        for extra in extras:
            if isinstance(extra, str):
                description = extra
            else:
                found = getattr(extra, "description", None)
                if isinstance(found, str):
                    description = found
        return inner, description
    return tp, None


def read_params(fn: Callable[..., Any], *, skip: tuple[type, ...] = ()) -> tuple[
    list[ParamSpec], str | None, bool
]:
    """Read a handler's parameters (minus ``self``) from its signature and resolved hints.

    Returns (params, name of the parameter whose annotation is one of ``skip``, accepts **kw).
    """
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward refs: fall back to raw annotations
        hints = {k: p.annotation for k, p in sig.parameters.items()}
    params: list[ParamSpec] = []
    injected: str | None = None
    var_kw = False
    for index, (pname, p) in enumerate(sig.parameters.items()):
        if index == 0 and pname in ("self", "cls"):
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            var_kw = True
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        ann = hints.get(pname, Any)
        if ann is _MISSING:
            ann = Any
        inner, desc = split_annotated(ann)
        if skip and isinstance(inner, type) and issubclass(inner, skip):
            injected = pname
            continue
        default = p.default
        if default is _MISSING and typing.get_origin(ann) is typing.Annotated:
            # pydantic's Field(default=...) carries a default inside the metadata
            for extra in typing.get_args(ann)[1:]:
                d = getattr(extra, "default", _MISSING)
                undefined = type(d).__name__ == "PydanticUndefinedType"
                if d is not _MISSING and not undefined and d is not ...:
                    default = d
        params.append(ParamSpec(pname, inner, default, desc))
    return params, injected, var_kw


def input_schema(params: list[ParamSpec]) -> dict[str, Any]:
    """The object schema for a parameter list (defaults listed, required ones named)."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for p in params:
        s = type_schema(p.annotation)
        if p.description:
            s = {**s, "description": p.description}
        if not p.required:
            try:
                json.dumps(p.default)
                s = {**s, "default": p.default}
            except (TypeError, ValueError):
                pass
        else:
            required.append(p.name)
        props[p.name] = s
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string", "contentEncoding": "base64"},
    decimal.Decimal: {"type": "string", "format": "decimal"},
    _dt.datetime: {"type": "string", "format": "date-time"},
    _dt.date: {"type": "string", "format": "date"},
    _dt.time: {"type": "string", "format": "time"},
    uuid.UUID: {"type": "string", "format": "uuid"},
    dict: {"type": "object"},
    list: {"type": "array"},
}


def type_schema(tp: Any) -> dict[str, Any]:
    """JSON Schema for one annotation; unknown types give ``{}`` (anything)."""
    tp, desc = split_annotated(tp)
    schema = _type_schema(tp)
    if desc:
        schema = {**schema, "description": desc}
    return schema


def _type_schema(tp: Any) -> dict[str, Any]:
    if tp is Any or tp is object:
        return {}
    if tp in _SIMPLE:
        return dict(_SIMPLE[tp])
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [type_schema(a) for a in args]}
    if origin in (list, tuple, set, frozenset) or (
        origin is not None and inspect.isclass(origin) and issubclass(origin, typing.Sequence)
        and origin is not str
    ):
        s: dict[str, Any] = {"type": "array"}
        if args and not (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
            if origin is tuple:
                s["prefixItems"] = [type_schema(a) for a in args]
                return s
            s["items"] = type_schema(args[0])
        elif args:
            s["items"] = type_schema(args[0])
        if origin in (set, frozenset):
            s["uniqueItems"] = True
        return s
    if origin is not None and inspect.isclass(origin) and issubclass(origin, Mapping):
        s = {"type": "object"}
        if len(args) == 2:
            s["additionalProperties"] = type_schema(args[1])
        return s
    if inspect.isclass(tp):
        if issubclass(tp, enum.Enum):
            return {"enum": [m.value for m in tp]}
        if attrs.has(tp):
            props = {}
            req = []
            hints = typing.get_type_hints(tp, include_extras=True)
            for f in attrs.fields(tp):
                props[f.name] = type_schema(hints.get(f.name, Any))
                if f.default is attrs.NOTHING:
                    req.append(f.name)
            return {"type": "object", "properties": props, **({"required": req} if req else {})}
        if typing.is_typeddict(tp):
            hints = typing.get_type_hints(tp, include_extras=True)
            req = sorted(getattr(tp, "__required_keys__", set()))
            return {
                "type": "object",
                "properties": {k: type_schema(v) for k, v in hints.items()},
                **({"required": req} if req else {}),
            }
        for base, s in _SIMPLE.items():
            if base is not type(None) and isinstance(base, type) and issubclass(tp, base):
                return dict(s)
    return {}


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def coerce(value: Any, tp: Any) -> Any:
    """Convert a JSON (or query-string) value to ``tp``; raise CoercionError if it cannot be."""
    tp, _ = split_annotated(tp)
    if tp is Any or tp is object or tp is _MISSING:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        # exact type matches first so that "1" stays a str in Union[str, int]
        for a in args:
            if a is not type(None) and inspect.isclass(a) and type(value) is a:
                return value
        for a in args:
            if a is type(None):
                continue
            try:
                return coerce(value, a)
            except CoercionError:
                continue
        raise CoercionError(f"{value!r} matches none of {_name(tp)}")
    if origin is typing.Literal:
        for option in args:
            if value == option and type(value) is type(option):
                return option
        for option in args:
            if isinstance(value, str) and str(option) == value:
                return option
        raise CoercionError(f"{value!r} is not one of {list(args)}")
    if tp is type(None) or tp is None:
        if value is None:
            return None
        raise CoercionError(f"{value!r} is not null")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise CoercionError(f"{value!r} is not a boolean")
    if tp is int:
        if isinstance(value, bool):
            raise CoercionError(f"{value!r} is not an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise CoercionError(f"{value!r} is not an integer")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise CoercionError(f"{value!r} is not a number")
    if tp is str:
        if isinstance(value, str):
            return value
        raise CoercionError(f"{value!r} is not a string")
    if tp is decimal.Decimal:
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                return decimal.Decimal(str(value))
            except decimal.InvalidOperation:
                pass
        raise CoercionError(f"{value!r} is not a decimal")
    if tp in (_dt.datetime, _dt.date, _dt.time):
        if isinstance(value, tp):
            return value
        if isinstance(value, str):
            text = value.strip()
            if text.endswith(("Z", "z")):
                text = text[:-1] + "+00:00"
            try:
                return tp.fromisoformat(text)
            except ValueError:
                pass
        raise CoercionError(f"{value!r} is not an ISO {tp.__name__}")
    if tp is uuid.UUID:
        try:
            return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        except ValueError:
            raise CoercionError(f"{value!r} is not a UUID") from None
    if tp is bytes:
        import base64

        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                pass
        raise CoercionError(f"{value!r} is not base64")
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple, set, frozenset):
        container = origin or tp
        if isinstance(value, str):
            try:
                loaded = json.loads(value)
            except ValueError:
                loaded = [value]
            value = loaded if isinstance(loaded, list) else [value]
        if not isinstance(value, (list, tuple)):
            raise CoercionError(f"{value!r} is not a list")
        if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise CoercionError(f"expected {len(args)} items, got {len(value)}")
            return tuple(coerce(v, a) for v, a in zip(value, args, strict=True))
        item = args[0] if args else Any
        return container(coerce(v, item) for v in value)
    is_mapping = origin is not None and inspect.isclass(origin) and issubclass(origin, Mapping)
    if is_mapping or tp is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if not isinstance(value, Mapping):
            raise CoercionError(f"{value!r} is not an object")
        vt = args[1] if len(args) == 2 else Any
        return {k: coerce(v, vt) for k, v in value.items()}
    if inspect.isclass(tp):
        if issubclass(tp, enum.Enum):
            if isinstance(value, tp):
                return value
            try:
                return tp(value)
            except ValueError:
                pass
            for m in tp:
                if isinstance(value, str) and (str(m.value) == value or m.name == value):
                    return m
            raise CoercionError(f"{value!r} is not one of {[m.value for m in tp]}")
        if attrs.has(tp):
            if isinstance(value, tp):
                return value
            import cattrs

            try:
                return cattrs.structure(value, tp)
            except Exception as exc:
                raise CoercionError(f"{value!r} does not fit {tp.__name__}: {exc}") from None
    return value


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def to_jsonable(value: Any) -> Any:
    """Turn a handler's return value into JSON-ready data (attrs, enums, dates, sets...)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if attrs.has(type(value)):
        return to_jsonable(attrs.asdict(value, recurse=False))
    dump = getattr(value, "model_dump", None)  # pydantic models, without importing pydantic
    if callable(dump):
        return to_jsonable(dump(mode="json"))
    to_wire = getattr(value, "to_wire", None)
    if callable(to_wire):
        return to_wire()
    return str(value)

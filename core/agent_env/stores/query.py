"""The document-store query language: validation plus a pure-Python reference implementation.

Backends translate filters into their own query language (SQL, DynamoDB expressions, Firestore
queries) for speed, but the meaning is defined here: :func:`matches` and :func:`apply_update`
are the reference semantics the conformance suite checks, and a backend may fall back on them
(for example to post-filter what a cloud query cannot express, or to compute an update inside
a read-modify-write transaction, as the SQLite store does).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent_env.stores.base import Document, Filter, InvalidQuery, InvalidUpdate, Sort

ID_FIELD = "_id"
COMPARISONS = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = ("$eq", "$ne", *COMPARISONS, "$in", "$exists")
UPDATE_OPERATORS = ("$set", "$unset", "$inc", "$push")

_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COLLECTION = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


class _Missing:
    """The value of a path that is not in the document (distinct from JSON null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# --- validation ------------------------------------------------------------------------------


def validate_collection(name: Any) -> str:
    if not isinstance(name, str) or not _COLLECTION.match(name):
        raise InvalidQuery(
            f"invalid collection name {name!r}: use 1-100 of letters, digits, '_' and '-'"
        )
    return name


def validate_field(path: Any) -> str:
    """A field path: ``_id`` or dotted identifiers (backends embed these in their queries)."""
    if path == ID_FIELD:
        return path
    if not isinstance(path, str) or not all(_SEGMENT.match(s) for s in path.split(".")):
        raise InvalidQuery(
            f"invalid field path {path!r}: use '_id' or dotted names such as 'result.score' "
            "(letters, digits and '_', not starting with a digit)"
        )
    return path


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | bool | int | float)


def _check_operand(path: str, op: str, value: Any) -> None:
    if op == "$exists":
        if not isinstance(value, bool):
            raise InvalidQuery(f"{path}: $exists takes true or false, not {value!r}")
    elif op == "$in":
        if not isinstance(value, list | tuple) or not all(is_scalar(v) for v in value):
            raise InvalidQuery(f"{path}: $in takes a list of scalars, not {value!r}")
    elif op in COMPARISONS:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidQuery(f"{path}: {op} takes a number or a string, not {value!r}")
    elif not is_scalar(value):
        raise InvalidQuery(
            f"{path}: {op} takes a scalar (str, number, bool or null), not {type(value).__name__}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidQuery(f"{path}: {op} operand must be finite, not {value!r}")


def normalize_filter(filter: Filter | None) -> list[tuple[str, str, Any]]:
    """Validate ``filter`` and flatten it to ``(path, operator, operand)`` triples (ANDed)."""
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        raise InvalidQuery(f"a filter must be a mapping, not {type(filter).__name__}")
    out: list[tuple[str, str, Any]] = []
    for path, condition in filter.items():
        validate_field(path)
        if isinstance(condition, Mapping):
            if not condition:
                raise InvalidQuery(f"{path}: empty condition")
            for op, operand in condition.items():
                if op not in OPERATORS:
                    known = ", ".join(OPERATORS)
                    raise InvalidQuery(f"{path}: unknown operator {op!r} (known: {known})")
                _check_operand(path, op, operand)
                out.append((path, op, list(operand) if op == "$in" else operand))
        else:
            _check_operand(path, "$eq", condition)
            out.append((path, "$eq", condition))
    return out


def normalize_sort(sort: Sort | None) -> list[tuple[str, int]]:
    """``"a"``, ``"-a"`` or ``[("a", 1), ("b", -1)]`` -> ``[(path, 1 | -1), ...]``."""
    if sort is None:
        return []
    items: Sequence[Any] = [sort] if isinstance(sort, str) else sort
    out: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, str):
            path, direction = (item[1:], -1) if item.startswith("-") else (item, 1)
        elif isinstance(item, tuple | list) and len(item) == 2 and item[1] in (1, -1):
            path, direction = item[0], int(item[1])
        else:
            raise InvalidQuery(f"invalid sort key {item!r}: use 'field', '-field' or (field, 1|-1)")
        out.append((validate_field(path), direction))
    return out


def normalize_index_fields(fields: Sequence[str | tuple[str, int]]) -> list[tuple[str, int]]:
    if isinstance(fields, str) or not fields:
        raise InvalidQuery(f"index fields must be a non-empty list, not {fields!r}")
    return normalize_sort(list(fields))


def index_fields(
    fields: Sequence[str | tuple[str, int]], *, unique: bool, ttl: float | None
) -> list[tuple[str, int]]:
    """The normalised fields of an ``ensure_index`` call, refusing an impossible TTL index.

    Every document-store backend checks the same rule here: a TTL index has one field, is not
    unique and has a non-negative TTL.
    """
    spec = normalize_index_fields(fields)
    if ttl is not None and (len(spec) != 1 or unique or ttl < 0):
        raise InvalidQuery("a TTL index has exactly one field, is not unique and ttl >= 0")
    return spec


def check_page(limit: int | None, offset: int) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidQuery(f"limit must be a non-negative integer or None, not {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidQuery(f"offset must be a non-negative integer, not {offset!r}")


def dumps(document: Mapping[str, Any]) -> str:
    """Canonical JSON text of a document (sorted keys, no NaN): what backends store."""
    try:
        return json.dumps(
            document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise InvalidQuery(f"a document must be JSON (str keys, finite numbers): {exc}") from None


def _check_keys(value: Any, where: str = "document") -> None:
    """JSON would silently turn ``{1: x}`` into ``{"1": x}``: refuse non-string keys instead."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            if not isinstance(key, str):
                raise InvalidQuery(f"{where}: keys must be strings, not {key!r}")
            _check_keys(child, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for child in value:
            _check_keys(child, where)


def prepare_document(document: Mapping[str, Any], new_id: str | None = None) -> Document:
    """A deep, JSON-checked copy of ``document`` with a string ``_id``."""
    if not isinstance(document, Mapping):
        raise InvalidQuery(f"a document must be a mapping, not {type(document).__name__}")
    _check_keys(document)
    doc: Document = json.loads(dumps(document))
    if ID_FIELD not in doc:
        if new_id is None:
            raise InvalidQuery("the document has no _id")
        doc[ID_FIELD] = new_id
    if not isinstance(doc[ID_FIELD], str) or not doc[ID_FIELD]:
        raise InvalidQuery(f"_id must be a non-empty string, not {doc[ID_FIELD]!r}")
    return doc


# --- the reference semantics -----------------------------------------------------------------


def get_path(document: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, or :data:`MISSING`."""
    value: Any = document
    for segment in path.split("."):
        if not isinstance(value, Mapping) or segment not in value:
            return MISSING
        value = value[segment]
    return value


def _kind(value: Any) -> str:
    if value is MISSING or value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    return "other"


def _equal(value: Any, operand: Any) -> bool:
    if operand is None:
        return value is None or value is MISSING
    return _kind(value) == _kind(operand) and value == operand


def _condition_holds(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _equal(value, operand)
    if op == "$ne":
        return not _equal(value, operand)
    if op == "$in":
        return any(_equal(value, candidate) for candidate in operand)
    if op == "$exists":
        return (value is not MISSING) == operand
    if _kind(value) != _kind(operand):
        return False
    if op == "$gt":
        return value > operand
    if op == "$gte":
        return value >= operand
    if op == "$lt":
        return value < operand
    return value <= operand


def matches(document: Mapping[str, Any], filter: Filter | None) -> bool:
    """Whether ``document`` satisfies ``filter`` (the meaning every backend must reproduce)."""
    return all(
        _condition_holds(get_path(document, path), op, operand)
        for path, op, operand in normalize_filter(filter)
    )


def sort_documents(documents: list[Document], sort: Sort | None) -> list[Document]:
    """Sort in Python (missing/null first ascending; mixed types grouped null<bool<number<text)."""
    order = {"null": 0, "bool": 1, "number": 2, "text": 3, "other": 4}
    result = list(documents)
    for path, direction in reversed(normalize_sort(sort)):

        def key(doc: Document, path: str = path) -> tuple[int, Any]:
            value = get_path(doc, path)
            kind = _kind(value)
            return (order[kind], value if kind in ("bool", "number", "text") else 0)

        result.sort(key=key, reverse=direction < 0)
    return result


def normalize_update(changes: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, Any]]:
    """Validate an update and flatten it to ``(operator, path, value)`` triples."""
    if not isinstance(changes, Mapping) or not changes:
        raise InvalidQuery("an update must be a non-empty mapping of operators ($set, ...)")
    out: list[tuple[str, str, Any]] = []
    for op, fields in changes.items():
        if op not in UPDATE_OPERATORS:
            known = ", ".join(UPDATE_OPERATORS)
            raise InvalidQuery(
                f"unknown update operator {op!r} (known: {known}); "
                "to replace a whole document use replace()"
            )
        if not isinstance(fields, Mapping) or not fields:
            raise InvalidQuery(f"{op} takes a non-empty mapping of field -> value")
        for path, value in fields.items():
            validate_field(path)
            if path == ID_FIELD:
                raise InvalidQuery("_id cannot be changed")
            if op == "$inc" and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise InvalidQuery(f"$inc {path}: the increment must be a number, not {value!r}")
            out.append((op, path, value))
    dumps({"v": [value for _, _, value in out]})  # JSON-check the values
    return out


def apply_update(document: Mapping[str, Any], changes: Mapping[str, Mapping[str, Any]]) -> Document:
    """A new document with ``changes`` applied (the input is not modified)."""
    result: Document = copy.deepcopy(dict(document))
    for op, path, value in normalize_update(changes):
        *parents, last = path.split(".")
        target: Any = result
        for segment in parents:
            child = target.get(segment, MISSING)
            if child is MISSING:
                if op == "$unset":
                    break
                child = target[segment] = {}
            elif not isinstance(child, dict):
                raise InvalidUpdate(f"{op} {path}: '{segment}' holds a non-object value")
            target = child
        else:
            _apply_one(target, op, path, last, value)
    return result


def _apply_one(target: dict[str, Any], op: str, path: str, last: str, value: Any) -> None:
    if op == "$set":
        target[last] = copy.deepcopy(value)
    elif op == "$unset":
        target.pop(last, None)
    elif op == "$inc":
        current = target.get(last, 0)
        if isinstance(current, bool) or not isinstance(current, int | float):
            raise InvalidUpdate(f"$inc {path}: the stored value {current!r} is not a number")
        target[last] = current + value
    else:  # $push
        current = target.setdefault(last, [])
        if not isinstance(current, list):
            raise InvalidUpdate(f"$push {path}: the stored value {current!r} is not a list")
        current.append(copy.deepcopy(value))

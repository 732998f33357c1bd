"""Input schemas from type hints, descriptions from Annotated metadata, and coercion."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from typing import Annotated, Any, Literal

import attrs
import pytest
from pydantic import Field

from agentenv_protocol.schema import CoercionError, coerce, input_schema, read_params, type_schema


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class FieldLike:
    """Stands in for pydantic's FieldInfo: only a ``description`` attribute matters."""

    def __init__(self, description: str) -> None:
        self.description = description


@attrs.define
class Point:
    x: int
    y: int = 0


def handler(self: Any, a: Annotated[str, FieldLike("the a")], b: int = 3,
            c: Annotated[list[float], "numbers"] | None = None, d: Mode = Mode.FAST,
            e: Literal["x", "y"] = "x", p: Point | None = None) -> None: ...


def test_schema_from_hints() -> None:
    params, injected, var_kw = read_params(handler)
    assert (injected, var_kw) == (None, False)
    schema = input_schema(params)
    assert schema["required"] == ["a"]
    props = schema["properties"]
    assert props["a"] == {"type": "string", "description": "the a"}
    assert props["b"] == {"type": "integer", "default": 3}
    assert props["c"]["anyOf"][0] == {"type": "array", "items": {"type": "number"},
                                      "description": "numbers"}
    assert props["d"] == {"enum": ["fast", "slow"]}  # enum default is not JSON: left out
    assert props["e"] == {"enum": ["x", "y"], "default": "x"}
    assert props["p"]["anyOf"][0]["properties"] == {"x": {"type": "integer"},
                                                    "y": {"type": "integer"}}


def pydantic_style(self: Any, text: Annotated[str, Field(description="The text.")],
                   n: Annotated[int, Field(description="N", default=2)]) -> None: ...


def test_pydantic_field_description_without_importing_pydantic_ourselves() -> None:
    schema = input_schema(read_params(pydantic_style)[0])
    assert schema["properties"]["text"] == {"type": "string", "description": "The text."}
    assert schema["properties"]["n"] == {"type": "integer", "description": "N", "default": 2}
    assert schema["required"] == ["text"]


@pytest.mark.parametrize(("value", "tp", "expected"), [
    ("true", bool, True), ("off", bool, False), (1, bool, True),
    ("42", int, 42), (3.0, int, 3), ("1.5", float, 1.5), (2, float, 2.0),
    ("3.10", decimal.Decimal, decimal.Decimal("3.10")),
    ("2025-01-02", dt.date, dt.date(2025, 1, 2)),
    ("2025-01-02T03:04:05Z", dt.datetime,
     dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
    ("10:11", dt.time, dt.time(10, 11)),
    ("12345678-1234-5678-1234-567812345678", uuid.UUID,
     uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("slow", Mode, Mode.SLOW), ("SLOW", Mode, Mode.SLOW),
    ("2", Literal[1, 2], 2), ("b", Literal["a", "b"], "b"),
    (None, int | None, None), ("5", int | None, 5), ("5", str | int, "5"),
    (["1", "2"], list[int], [1, 2]), ('["a"]', list[str], ["a"]),
    ({"a": "1"}, dict[str, int], {"a": 1}),
    ({"x": 1}, Point, Point(1)),
    ("anything", Any, "anything"),
])
def test_coerce(value: Any, tp: Any, expected: Any) -> None:
    assert coerce(value, tp) == expected


@pytest.mark.parametrize(("value", "tp"), [
    ("maybe", bool), (True, int), ("x", int), ("x", float), (3, str), ("x", decimal.Decimal),
    ("nope", dt.date), ("zz", uuid.UUID), ("medium", Mode), ("c", Literal["a", "b"]),
    ("x", int | None), ({"y": 1}, Point), (5, list[int]),
])
def test_coerce_refuses(value: Any, tp: Any) -> None:
    with pytest.raises(CoercionError):
        coerce(value, tp)


def test_type_schema_basics() -> None:
    assert type_schema(dt.datetime) == {"type": "string", "format": "date-time"}
    assert type_schema(dict[str, int]) == {"type": "object",
                                           "additionalProperties": {"type": "integer"}}
    assert type_schema(Any) == {}

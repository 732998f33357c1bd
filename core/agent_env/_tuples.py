"""Typed tuple converters for attrs fields.

``attrs.field(converter=tuple)`` makes mypy's attrs plugin type the ``__init__`` parameter as
``Iterable[_T_co]`` with the type variable left unsolved, so every caller is an error; it cannot
solve a generic converter either. One converter per element type keeps callers checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def int_tuple(items: Iterable[int]) -> tuple[int, ...]:
    return tuple(items)


def str_tuple(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


def dict_tuple(items: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(items)

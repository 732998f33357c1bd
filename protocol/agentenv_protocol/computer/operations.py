"""What a driver implements: one method per operation, marked with a decorator of this module.

The base class (:mod:`.driver`) serves the tools, extensions and data plane from them. Each is
called with screen pixels, positionally, and may be sync or async::

    display() -> Display                       set_display(width, height, scale) -> Display
    capture() -> Image                         (the whole display, at native resolution)
    click(x, y, button, count, modifiers)      drag(path, button, duration_ms, modifiers)
    scroll(x, y, direction, amount, modifiers) type_text(text)       press(keys)  (one chord)
    pointer_move(x, y)  pointer_down(button)  pointer_up(button)  pointer_position() -> (x, y)
    key_down(keys)  key_up(keys)
    run_in_session(argv, cwd, env, timeout_s) -> ExecResult        write_files({path: bytes})

A decorator is used bare (``@click``) or with platform predicates (``@click(os="linux")``) to
pick one method per platform. Input operations may return an :class:`Effect`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs

from .platform import Platform, matches, normalize, overlap

REQUIRED = ("display", "capture", "click", "drag", "scroll", "type_text", "press")
GROUPS = {"pointer": ("pointer_move", "pointer_down", "pointer_up", "pointer_position"),
          "keyboard": ("key_down", "key_up")}
OPTIONAL = ("set_display", "run_in_session", "write_files")
INPUT = frozenset({"click", "drag", "scroll", "type_text", "press", "pointer_move",
                   "pointer_down", "pointer_up", "key_down", "key_up"})
_MARK = "__agentenv_computer_op__"


@attrs.frozen
class Display:
    """The display: screen pixels, and image pixels a capture has per screen pixel."""

    width: int
    height: int
    scale: float = 1.0


@attrs.frozen
class Image:
    """A capture: ``png`` (or ``jpeg``) bytes, or raw pixels in mode ``RGB``, ``RGBA``,
    ``BGRA`` or ``BGRX``."""

    width: int
    height: int
    data: bytes = attrs.field(repr=False)
    mode: str = "png"


@attrs.frozen
class Effect:
    """What a driver can confirm an input did; what it cannot tell stays None."""

    focus_changed: bool | None = None
    pointer_moved: bool | None = None
    clipboard_used: bool | None = None
    detail: str | None = None


@attrs.frozen
class ExecResult:
    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    truncated: bool = False


@attrs.frozen
class ReadyCheck:
    name: str
    ok: bool
    detail: str = ""


@attrs.frozen
class _Mark:
    operation: str
    predicates: dict[str, frozenset[str]]
    default: bool = False


def _marker(operation: str) -> Callable[..., Any]:
    def decorate(fn: Callable[..., Any] | None = None, /, **predicates: Any) -> Any:
        mark = _Mark(operation, normalize(predicates))

        def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
            setattr(f, _MARK, mark)
            return f

        return wrap(fn) if fn is not None else wrap

    decorate.__name__ = decorate.__qualname__ = operation
    decorate.__doc__ = f"Mark the method that performs ``{operation}``."
    return decorate


display = _marker("display")
set_display = _marker("set_display")
capture = _marker("capture")
click = _marker("click")
drag = _marker("drag")
scroll = _marker("scroll")
type_text = _marker("type_text")
press = _marker("press")
pointer_move = _marker("pointer_move")
pointer_down = _marker("pointer_down")
pointer_up = _marker("pointer_up")
pointer_position = _marker("pointer_position")
key_down = _marker("key_down")
key_up = _marker("key_up")
run_in_session = _marker("run_in_session")
write_files = _marker("write_files")


def default_for(operation: str, **predicates: Any) -> Callable[[Any], Any]:
    """Mark a base-class default for ``operation``; a driver's own method replaces it."""
    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(f, _MARK, _Mark(operation, normalize(predicates), default=True))
        return f
    return wrap


def declared(cls: type) -> dict[str, list[tuple[str, dict[str, frozenset[str]]]]]:
    """Every operation ``cls`` marks: (method name, predicates); a base default is dropped
    where the driver marks the operation itself."""
    found: dict[str, list[tuple[str, _Mark]]] = {}
    for name in dir(cls):
        if name.startswith("__"):
            continue
        mark = getattr(inspect.getattr_static(cls, name, None), _MARK, None)
        if isinstance(mark, _Mark):
            found.setdefault(mark.operation, []).append((name, mark))
    out = {}
    for operation, marks in found.items():
        own = [(name, mark) for name, mark in marks if not mark.default]
        out[operation] = [(name, mark.predicates) for name, mark in (own or marks)]
    return out


def check_class(cls: type) -> None:
    """TypeError naming what is wrong: a required operation missing, half a group, two
    methods for one operation on one platform."""
    ops = declared(cls)
    problems = []
    missing = [op for op in REQUIRED if op not in ops]
    if missing:
        problems.append("missing required operation(s): "
                        + ", ".join("@" + op for op in missing))
    for group, members in GROUPS.items():
        have = [op for op in members if op in ops]
        if have and len(have) != len(members):
            lacking = [op for op in members if op not in ops]
            problems.append(f"the {group} group needs all of "
                            f"{', '.join('@' + op for op in members)}; missing "
                            f"{', '.join('@' + op for op in lacking)}")
    for op, methods in ops.items():
        for i, (a, pa) in enumerate(methods):
            for b, pb in methods[i + 1:]:
                if overlap(pa, pb):
                    problems.append(f"@{op} is marked on both {a} and {b}, and some platform "
                                    "matches both")
    if problems:
        raise TypeError(f"{cls.__qualname__}: " + "; ".join(problems))


def resolve(cls: type, running: Platform) -> dict[str, str]:
    """The method name each operation uses on ``running``; RuntimeError when a required one
    has none; a group only when all of it matches."""
    chosen = {}
    for op, methods in declared(cls).items():
        hits = [name for name, predicates in methods if matches(predicates, running)]
        if hits:
            chosen[op] = hits[0]
    missing = [op for op in REQUIRED if op not in chosen]
    if missing:
        raise RuntimeError(f"{cls.__qualname__} has no method for "
                           f"{', '.join('@' + op for op in missing)} on this platform "
                           f"({running.as_dict()})")
    for members in GROUPS.values():
        if not all(op in chosen for op in members):
            for op in members:
                chosen.pop(op, None)
    return chosen

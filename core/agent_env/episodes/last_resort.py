"""Teardown at interpreter exit, for whatever an episode or the env pool still has up.

Episodes tear down when their run ends and a spec's pool when it is closed; this is for the
rest: a training loop that exits without closing its spec, or an event loop shut down while a
teardown was still going. Each teardown is registered while it has something up; at exit the
ones with items left run once more, in a fresh event loop, best effort and silently.

It runs among ``threading``'s exit hooks rather than :mod:`atexit`'s: those run earlier, while
worker threads can still start (sandbox providers block in threads; by the time :mod:`atexit`
runs, ``concurrent.futures`` refuses new work).
"""

from __future__ import annotations

import atexit
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_env.tasks.teardown import Teardown

_OPEN: dict[int, Teardown] = {}
_INSTALLED = False


def keep(teardown: Teardown) -> None:
    """Tear ``teardown`` down at exit unless :func:`release` is called first."""
    global _INSTALLED
    if not _INSTALLED:
        _install()
        _INSTALLED = True
    _OPEN[id(teardown)] = teardown


def _install() -> None:
    import concurrent.futures.thread  # noqa: F401  (its exit hook must be registered first)
    import threading

    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:
            raise RuntimeError
        register(tear_down_left)  # runs before concurrent.futures' hook (reverse order)
    except RuntimeError:
        atexit.register(tear_down_left)


def release(teardown: Teardown) -> None:
    """``teardown`` has nothing up any more (or its owner took it back)."""
    if not teardown.still_up():
        _OPEN.pop(id(teardown), None)


def left() -> list[Teardown]:
    return [t for t in _OPEN.values() if t.still_up()]


def tear_down_left() -> None:
    """Run every teardown that still has items up; never raises."""
    import asyncio

    pending = left()
    _OPEN.clear()
    if not pending:
        return

    async def run_all() -> None:
        await asyncio.gather(*(t.run() for t in pending), return_exceptions=True)

    try:
        asyncio.run(run_all())
    except Exception:  # the process is exiting; there is no one left to tell
        pass
